package dispatch_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Built-in providers are served when their key is passed and set; other
// passed names stay project secrets; a configured provider overrides a
// built-in's base URL and adds routes of its own.
func TestResolveProviders(t *testing.T) {
	t.Parallel()
	bot := env(map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-1", "OPENAI_API_KEY": "sk-oa-2", "NPM_TOKEN": "npm-3", "MY_KEY": "my-4",
	})
	cfg, rest, err := dispatch.ResolveProviders(
		[]string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "NPM_TOKEN"},
		[]dispatch.ModelProvider{
			{Name: "openai", BaseURL: "http://127.0.0.1:9/v1"},
			{Name: "mine", BaseURL: "https://models.example/v1", KeyEnv: "MY_KEY"},
			{Name: "local", BaseURL: "http://ollama:11434/v1"},
		}, bot)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rest, []string{"NPM_TOKEN"}) {
		t.Errorf("rest = %v, want [NPM_TOKEN] (provider keys never reach the sandbox's environment)", rest)
	}
	want := []dispatch.GatewayProvider{
		{Name: "openai", BaseURL: "http://127.0.0.1:9/v1", API: dispatch.APIOpenAI, Key: "sk-oa-2"},
		{Name: "mine", BaseURL: "https://models.example/v1", API: dispatch.APIOpenAI, Key: "my-4"},
		{Name: "local", BaseURL: "http://ollama:11434/v1", API: dispatch.APIOpenAI},
		{Name: "anthropic", BaseURL: "https://api.anthropic.com", API: dispatch.APIAnthropic, Key: "sk-ant-1"},
	}
	if !slices.Equal(cfg.Providers, want) {
		t.Errorf("providers =\n%+v\nwant\n%+v", cfg.Providers, want)
	}
	if got := cfg.ProvidersEnv(); got != "openai=openai,mine=openai,local=openai,anthropic=anthropic" {
		t.Errorf("ProvidersEnv = %q", got)
	}
}

func TestResolveProvidersNothingServed(t *testing.T) {
	t.Parallel()
	cfg, rest, err := dispatch.ResolveProviders([]string{"HTTP_PROXY", "ANTHROPIC_API_KEY"}, nil, env(map[string]string{"HTTP_PROXY": "x"}))
	if err != nil || cfg != nil || !slices.Equal(rest, []string{"HTTP_PROXY"}) {
		t.Fatalf("= %v, %v, %v", cfg, rest, err)
	}
}

func TestResolveProvidersErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		providers []dispatch.ModelProvider
		want      string
	}{
		"key unset":  {[]dispatch.ModelProvider{{Name: "mine", BaseURL: "https://x/v1", KeyEnv: "NOPE"}}, "NOPE is not set"},
		"bad name":   {[]dispatch.ModelProvider{{Name: "My Co", BaseURL: "https://x/v1"}}, `name "My Co"`},
		"no url":     {[]dispatch.ModelProvider{{Name: "mine"}}, "base_url"},
		"bad api":    {[]dispatch.ModelProvider{{Name: "mine", BaseURL: "https://x", API: "soap"}}, `api "soap"`},
		"duplicated": {[]dispatch.ModelProvider{{Name: "a", BaseURL: "https://x"}, {Name: "a", BaseURL: "https://y"}}, "configured twice"},
	} {
		_, _, err := dispatch.ResolveProviders(nil, tc.providers, env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestParseProvider(t *testing.T) {
	t.Parallel()
	p, err := dispatch.ParseProvider("mine=https://models.example/v1,MY_KEY,anthropic")
	if err != nil || p != (dispatch.ModelProvider{Name: "mine", BaseURL: "https://models.example/v1", KeyEnv: "MY_KEY", API: dispatch.APIAnthropic}) {
		t.Fatalf("= %+v, %v", p, err)
	}
	p, err = dispatch.ParseProvider("local=http://ollama:11434/v1")
	if err != nil || p.KeyEnv != "" || p.API != "" {
		t.Fatalf("= %+v, %v", p, err)
	}
	for _, bad := range []string{"", "mine", "mine=", "a=b,c,d,e"} {
		if _, err := dispatch.ParseProvider(bad); err == nil {
			t.Errorf("ParseProvider(%q) accepted", bad)
		}
	}
}
