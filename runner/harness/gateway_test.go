package harness

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

var gatewayEnv = []string{
	"PATH=/usr/bin",
	dispatch.EnvModelGateway + "=http://127.0.0.1:4100/",
	dispatch.EnvModelProviders + "=openai=openai,mine=anthropic,anthropic=anthropic",
}

// OpenCode's overlay re-addresses every served provider to the gateway,
// with the dummy key; Anthropic-API providers get the SDK's /v1.
func TestOpenCodeOverlayPointsProvidersAtTheGateway(t *testing.T) {
	t.Parallel()
	cmd, err := NewOpenCode("/bin/opencode").Command(Request{Prompt: "p", Dir: "/w", Env: gatewayEnv})
	if err != nil {
		t.Fatal(err)
	}
	var content string
	for _, e := range cmd.Env {
		if v, ok := strings.CutPrefix(e, "OPENCODE_CONFIG_CONTENT="); ok {
			content = v
		}
	}
	var doc struct {
		Provider map[string]struct {
			Options struct{ BaseURL, APIKey string }
		}
		Permission map[string]string
	}
	if err := json.Unmarshal([]byte(content), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"openai": "http://127.0.0.1:4100/openai", "mine": "http://127.0.0.1:4100/mine/v1", "anthropic": "http://127.0.0.1:4100/anthropic/v1"}
	for name, url := range want {
		p := doc.Provider[name]
		if p.Options.BaseURL != url || p.Options.APIKey != dispatch.GatewayDummyKey {
			t.Errorf("provider %s = %+v, want baseURL %s and the dummy key", name, p.Options, url)
		}
	}
	if len(doc.Provider) != len(want) || doc.Permission["bash"] != "allow" {
		t.Errorf("overlay = %s", content)
	}

	// Without a gateway the overlay has no providers at all.
	cmd, _ = NewOpenCode("/bin/opencode").Command(Request{Prompt: "p", Dir: "/w", Env: []string{"PATH=/usr/bin"}})
	if slices.ContainsFunc(cmd.Env, func(e string) bool { return strings.Contains(e, `"provider"`) }) {
		t.Error("an overlay without a gateway names providers")
	}
}

// Claude Code's base URL and key are the gateway's, whatever the
// environment had; the route named anthropic wins over another Anthropic
// one.
func TestClaudeCodeEnvPointsAtTheGateway(t *testing.T) {
	t.Parallel()
	env := append([]string{"ANTHROPIC_BASE_URL=https://api.anthropic.com", "ANTHROPIC_API_KEY=sk-real", "ANTHROPIC_AUTH_TOKEN=tok"}, gatewayEnv...)
	cmd, err := NewClaudeCode("/bin/claude").Command(Request{Prompt: "p", Dir: "/w", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range cmd.Env {
		if strings.HasPrefix(e, "ANTHROPIC_") {
			got = append(got, e)
		}
	}
	want := []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4100/anthropic", "ANTHROPIC_API_KEY=" + dispatch.GatewayDummyKey}
	if !slices.Equal(got, want) {
		t.Fatalf("Claude Code's ANTHROPIC_ variables = %v, want %v", got, want)
	}

	// No Anthropic route: the environment is left as it is.
	env = []string{"ANTHROPIC_API_KEY=sk-x", dispatch.EnvModelGateway + "=http://127.0.0.1:1", dispatch.EnvModelProviders + "=openai=openai"}
	cmd, _ = NewClaudeCode("/bin/claude").Command(Request{Prompt: "p", Dir: "/w", Env: env})
	if !slices.Contains(cmd.Env, "ANTHROPIC_API_KEY=sk-x") {
		t.Errorf("env = %v", cmd.Env)
	}
}
