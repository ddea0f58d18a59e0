package app

import (
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// EnvFileVar names the env file the bot reads its settings from, such as
// the one `sandbox-bot setup` writes (KEY=VALUE lines, the private key as
// one double-quoted value). Variables set in the environment win over the
// file, the way they win over SANDBOX_CONFIG. It is not the runner's
// SANDBOX_ENV_FILE (dispatch.EnvEnvFile), which the process backend hands
// to runners: the App's credentials must never become a run's env layer.
const EnvFileVar = "SANDBOX_BOT_ENV_FILE"

// withEnvFile returns getenv backed by the file EnvFileVar names, if any.
// Errors name the file and line, never a value.
func withEnvFile(getenv Getenv) (Getenv, error) {
	path, ok := getenv(EnvFileVar)
	if !ok || strings.TrimSpace(path) == "" {
		return getenv, nil
	}
	vars, err := dotenv.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvFileVar, err)
	}
	return func(key string) (string, bool) {
		if v, ok := getenv(key); ok {
			return v, true
		}
		v, ok := vars[key]
		return v, ok
	}, nil
}

// checkSlug warns when GITHUB_APP_SLUG (written by setup, for people to
// read) is not the slug GitHub reports for the App's credentials: the env
// file of another App, most likely.
func (s *Server) checkSlug(login string) {
	if s.cfg.AppSlug != "" && !strings.EqualFold(s.cfg.AppSlug+"[bot]", login) {
		s.logger.Warn().Str("GITHUB_APP_SLUG", s.cfg.AppSlug).Str("bot", login).
			Msg("GITHUB_APP_SLUG is not the slug of the App these credentials belong to; mentions go to @" + strings.TrimSuffix(login, "[bot]"))
	}
}
