package app_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Custom model providers come from the server config file or
// SANDBOX_PROVIDERS; pass_env's provider keys are not project secrets.
func TestProvidersConfig(t *testing.T) {
	t.Parallel()
	path := writeServerConfig(t, `
pass_env: [ANTHROPIC_API_KEY, NPM_TOKEN]
providers:
  - name: mine
    base_url: https://models.example/v1
    key_env: MINE_KEY
  - name: anthropic
    base_url: http://127.0.0.1:9
`)
	c, err := app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": path, "MINE_KEY": "k1", "ANTHROPIC_API_KEY": "k2"})))
	if err != nil {
		t.Fatal(err)
	}
	want := []dispatch.ModelProvider{{Name: "mine", BaseURL: "https://models.example/v1", KeyEnv: "MINE_KEY"}, {Name: "anthropic", BaseURL: "http://127.0.0.1:9"}}
	if !slices.Equal(c.Providers, want) {
		t.Fatalf("providers = %+v", c.Providers)
	}
	if got := c.ProjectSecretEnv(); !slices.Equal(got, []string{"NPM_TOKEN"}) {
		t.Fatalf("ProjectSecretEnv = %v, want [NPM_TOKEN]", got)
	}

	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": path, "MINE_KEY": "k1",
		"SANDBOX_PROVIDERS": "local=http://ollama:11434/v1 claude=https://proxy.example,CLAUDE_KEY,anthropic", "CLAUDE_KEY": "k3"})))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 2 || c.Providers[1] != (dispatch.ModelProvider{Name: "claude", BaseURL: "https://proxy.example", KeyEnv: "CLAUDE_KEY", API: dispatch.APIAnthropic}) {
		t.Fatalf("SANDBOX_PROVIDERS does not replace the file's: %+v", c.Providers)
	}
}

func TestProvidersConfigErrors(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"mine=https://x/v1,MISSING_KEY": "MISSING_KEY is not set",
		"mine":                          "SANDBOX_PROVIDERS: provider \"mine\"",
		"Mine=https://x/v1":             `name "Mine"`,
	} {
		_, err := app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_PROVIDERS": env})))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SANDBOX_PROVIDERS=%s: err = %v, want %q", env, err, want)
		}
	}
}
