package app

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The configuration is the one place defaults are set: a configuration
// with nothing but the App's credentials hands the handlers every default,
// and NewBase takes them as they are.
func TestHandlerSettingsCarryTheDefaults(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	s := cfg.Settings
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"trigger label", s.TriggerLabel, DefaultTriggerLabel},
		{"max continues", s.MaxContinues, DefaultMaxContinues},
		{"max plan rounds", s.MaxPlanRounds, DefaultMaxPlanRounds},
		{"progress interval", s.ProgressInterval, DefaultProgressInterval},
		{"token refresh", s.TokenRefresh, DefaultTokenRefresh},
		{"dispatch deadline", s.DispatchDeadline, DefaultDispatchDeadline},
		{"check name", s.CheckName, DefaultCheckName},
		{"web url", s.WebURL, "https://github.com"},
		{"isolation", s.Isolation, dispatch.IsolationPrivileged},
		{"limits", s.Limits.MaxBudgetUSD, sandboxcfg.CeilingBudgetUSD},
		{"limits", s.Limits.PidsLimit, sandboxcfg.CeilingPids},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	b, err := handlers.NewBase(handlers.Wiring{Settings: s, Templates: templates.MustLoadEmbedded()})
	if err != nil {
		t.Fatalf("NewBase refused the configuration's settings: %v", err)
	}
	if b.Settings.TriggerLabel != s.TriggerLabel || b.Settings.DispatchDeadline != s.DispatchDeadline || b.Settings.Limits.MaxCPU != s.Limits.MaxCPU {
		t.Errorf("NewBase changed the settings: %+v, given %+v", b.Settings, s)
	}
}

// minimalConfig is the configuration with nothing but the App's
// credentials: every other setting at its default.
func minimalConfig(t *testing.T) *Config {
	t.Helper()
	cfg, err := LoadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret, "GITHUB_APP_PRIVATE_KEY": testKey}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
