package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// EnvAttempt and EnvAttempts tell the agent's programs that the run is
// attempt k of N execute runs of one approval (/approve --attempts N).
const (
	EnvAttempt  = "SANDBOX_ATTEMPT"
	EnvAttempts = "SANDBOX_ATTEMPTS"
)

// runnerOnlyEnv are variables that are the runner's alone: where its work
// order is, how it is launched, and the names a GitHub token commonly
// travels under. None of them reaches the agent.
var runnerOnlyEnv = []string{
	dispatch.EnvWorkOrder, dispatch.EnvAgentUser, dispatch.EnvWorkspace, dispatch.EnvStateDir,
	dispatch.EnvTemplatesDir, dispatch.EnvPushInterval, dispatch.EnvEnvFile, dispatch.EnvStartupGrace,
	dispatch.EnvSetupCacheDir, dispatch.EnvSetupCacheMaxSize, dispatch.EnvStartTimings,
	"GITHUB_TOKEN", "GH_TOKEN", "GIT_ASKPASS", "SSH_ASKPASS",
}

// agentBase is the runner's environment as the agent, setup, the checks
// and the dev server may see it: without the runner's own variables,
// without any variable that holds the token or names its file, and, when
// the agent is another user, with that user's identity.
func agentBase(environ []string, tokenFile string, agent *AgentUser) []string {
	env := dotenv.Without(environ, runnerOnlyEnv...)
	token := ""
	if tokenFile != "" {
		if b, err := os.ReadFile(tokenFile); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	out := env[:0:0]
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		if tokenFile != "" && strings.Contains(v, tokenFile) {
			continue
		}
		if token != "" && strings.Contains(v, token) {
			continue
		}
		out = append(out, kv)
	}
	if a := agent; a != nil {
		out = append(dotenv.Without(out, "HOME", "USER", "LOGNAME"), "HOME="+a.Home, "USER="+a.Name, "LOGNAME="+a.Name)
	}
	return out
}

// agentEnv is the one place the environment of the agent and of
// everything it starts is composed: agentBase, then git's identity, then
// the resolved project variables (.sandbox.yml env, .env files, ${VAR}
// secrets given to the run, --env-file), then the OpenCode configuration.
// A component that must keep something out of the agent's reach, or route
// the agent through something (a model gateway), does it here.
func (c *checkout) agentEnv(vars map[string]string) ([]string, error) {
	base := agentBase(c.opts.Environ, c.order.TokenFile, c.opts.Agent)
	if c.ws.git != nil {
		base = c.ws.git.Env()
	}
	if c.ws.browser != nil {
		// Where the agent's screencasts go to reach the PR (prompts/browser).
		base = append(dotenv.Without(base, EnvRecordingsDir), EnvRecordingsDir+"="+c.ws.browser.recordings)
	}
	merged := mergeEnv(base, vars)
	if c.order.Variants > 1 {
		// Which attempt of an /approve --attempts N this is, for a
		// command harness's program (the prompt says it to every agent);
		// after the project's variables, so none of them stands in.
		merged = append(dotenv.Without(merged, EnvAttempt, EnvAttempts),
			EnvAttempt+"="+strconv.Itoa(c.order.Variant), EnvAttempts+"="+strconv.Itoa(c.order.Variants))
	}
	env, err := openCodeConfigEnv(merged, c.ws.stateDir, c.opts.Agent)
	if err != nil {
		return nil, err
	}
	db, err := openCodeDB(c.ws.stateDir, c.opts.Agent)
	if err != nil {
		return nil, err
	}
	return append(dotenv.Without(env, harness.EnvOpenCodeDB), harness.EnvOpenCodeDB+"="+db), nil
}

// openCodeDB is the run's own OpenCode database, in a directory of the
// agent's (private to it) under the state dir: it holds this run's
// sessions only, so the plan run carries it to the execute run as a file
// (runner/harness/ocdb), and plan revisions of the CLI, which share a state
// dir, continue in it. On the host OpenCode's default database is the
// person's own, with every session they ever had.
func openCodeDB(stateDir string, agent *AgentUser) (string, error) {
	dir := filepath.Join(stateDir, "opencode")
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("create the agent's OpenCode data directory: %w", err)
	}
	if err := agent.give(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, "opencode.db"), nil
}
