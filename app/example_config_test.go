package app

import (
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The example server configuration in deploy/ stays loadable and means
// what its comments say.
func TestExampleServerConfigLoads(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SANDBOX_CONFIG":            "../deploy/sandbox-bot.example.yml",
		"GITHUB_APP_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": testKey,
	}
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GitHub.App.IntegrationID != 123456 || cfg.Backend != "docker" || cfg.Limits.MaxBudgetUSD != 20 ||
		cfg.Defaults.Harness != "opencode" || cfg.TokenRefresh != 45*time.Minute || len(cfg.AllowTeams) != 1 ||
		cfg.Nomad.KillTimeout != time.Minute || len(cfg.Defaults.Network.Allow) != 4 || cfg.PassEnv[0] != "ANTHROPIC_API_KEY" ||
		cfg.Caps != (dispatch.Caps{Global: 20, PerInstallation: 10, PerRepo: 3}) {
		t.Errorf("example config read as %+v", cfg)
	}
}
