package process

import (
	"slices"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// baseEnv are the variables of the launcher a runner process gets besides
// the pass-env names: what programs need to find themselves and behave
// (paths, locale, temp dir, proxies, CA bundles) and the SANDBOX_* names
// the runner reads. Nothing else: not GITHUB_APP_* (the App's key),
// NOMAD_TOKEN, the webhook secret or whatever else the launcher holds.
var baseEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	// The operator's opencode.json (providers); the keys it names must be
	// pass-env names.
	"OPENCODE_CONFIG",
	dispatch.EnvWorkspace, dispatch.EnvStateDir, dispatch.EnvTemplatesDir, dispatch.EnvPushInterval,
	dispatch.EnvEnvFile, dispatch.EnvStartupGrace, dispatch.EnvServicesFile, dispatch.EnvOpenCodeConfigJSON,
	"SANDBOX_OPENCODE_BIN", "SANDBOX_CLAUDE_BIN", dispatch.EnvOSVDir,
}

// MinimalEnv picks from environ (KEY=VALUE entries) the variables a runner
// process may see: baseEnv, LC_* locale settings, and the pass names (the
// provider keys the operator or user chose to hand to agents).
func MinimalEnv(environ []string, pass []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if slices.Contains(baseEnv, k) || strings.HasPrefix(k, "LC_") || slices.Contains(pass, k) {
			out = append(out, kv)
		}
	}
	return out
}
