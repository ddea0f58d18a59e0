package dispatch

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// The model gateway: provider keys never enter the agent's reach. The bot
// resolves the operator's providers and keys into a GatewayConfig, the
// backend writes it as a file that only the sandbox's init (root) reads, and
// the init serves a plain-HTTP gateway on loopback that adds each
// provider's key and forwards over HTTPS. The harnesses get the gateway's
// address as their provider base URL and a dummy key.

// Environment the init gives the runner when the gateway runs.
const (
	// EnvModelGateway is the gateway's base URL (http://127.0.0.1:PORT);
	// provider NAME is served under /NAME/.
	EnvModelGateway = "SANDBOX_MODEL_GATEWAY"
	// EnvModelProviders lists the served providers as name=api pairs,
	// comma-separated ("anthropic=anthropic,openai=openai").
	EnvModelProviders = "SANDBOX_MODEL_PROVIDERS"
)

// GatewayDummyKey is the key the harnesses are configured with: SDKs insist
// on one, and the gateway replaces it with the real key.
const GatewayDummyKey = "sandbox-model-gateway"

// GatewayDir is where a docker sandbox finds the gateway's file (inside
// the secrets bind); the init hides the directory once it has read it.
const GatewayDir = SecretsDir + "/gateway"

// GatewayFileName is the gateway's file inside its directory.
const GatewayFileName = "providers.json"

// ProviderAPI is the wire protocol of a provider, which decides its auth
// header and how harnesses address it.
type ProviderAPI string

// Provider APIs.
const (
	// APIOpenAI is OpenAI-compatible: Authorization: Bearer KEY; the base
	// URL is what the SDK's baseURL takes (ending in /v1 or the like).
	APIOpenAI ProviderAPI = "openai"
	// APIAnthropic is Anthropic Messages: x-api-key: KEY; the base URL is
	// the API root without /v1, as ANTHROPIC_BASE_URL takes it.
	APIAnthropic ProviderAPI = "anthropic"
)

// ModelProvider is a provider as the operator configures it: where it is
// and which environment variable of the bot holds its key.
type ModelProvider struct {
	// Name routes /NAME/ at the gateway and is the OpenCode provider id.
	Name    string      `yaml:"name" json:"name"`
	BaseURL string      `yaml:"base_url" json:"base_url"`
	KeyEnv  string      `yaml:"key_env" json:"key_env,omitempty"`
	API     ProviderAPI `yaml:"api" json:"api,omitempty"`
}

// BuiltinProviders are served when the operator passes their key variable
// (SANDBOX_PASS_ENV, pass_env, --pass-env). A configured provider of the
// same name overrides the fields it sets.
func BuiltinProviders() []ModelProvider {
	return []ModelProvider{
		{Name: "anthropic", BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_API_KEY", API: APIAnthropic},
		{Name: "openai", BaseURL: "https://api.openai.com/v1", KeyEnv: "OPENAI_API_KEY", API: APIOpenAI},
		{Name: "openrouter", BaseURL: "https://openrouter.ai/api/v1", KeyEnv: "OPENROUTER_API_KEY", API: APIOpenAI},
		{Name: "groq", BaseURL: "https://api.groq.com/openai/v1", KeyEnv: "GROQ_API_KEY", API: APIOpenAI},
		{Name: "mistral", BaseURL: "https://api.mistral.ai/v1", KeyEnv: "MISTRAL_API_KEY", API: APIOpenAI},
		{Name: "deepseek", BaseURL: "https://api.deepseek.com/v1", KeyEnv: "DEEPSEEK_API_KEY", API: APIOpenAI},
		{Name: "xai", BaseURL: "https://api.x.ai/v1", KeyEnv: "XAI_API_KEY", API: APIOpenAI},
	}
}

// GatewayProvider is one route of the gateway, key included: it only ever
// travels in the gateway's file, never in a work order or environment.
type GatewayProvider struct {
	Name    string      `json:"name"`
	BaseURL string      `json:"base_url"`
	API     ProviderAPI `json:"api"`
	Key     string      `json:"key,omitempty"`
}

// GatewayConfig is the content of the gateway's file.
type GatewayConfig struct {
	Providers []GatewayProvider `json:"providers"`
}

// String never shows a key: a config that reaches a log by accident names
// the routes only.
func (c GatewayConfig) String() string {
	var parts []string
	for _, p := range c.Providers {
		parts = append(parts, p.Name+"->"+p.BaseURL)
	}
	return "gateway[" + strings.Join(parts, " ") + "]"
}

// GoString keeps %#v from printing keys too.
func (c GatewayConfig) GoString() string { return c.String() }

// Encode is the file's bytes.
func (c GatewayConfig) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode the model gateway's providers: %w", err)
	}
	return b, nil
}

// ProvidersEnv is EnvModelProviders' value.
func (c GatewayConfig) ProvidersEnv() string {
	var parts []string
	for _, p := range c.Providers {
		parts = append(parts, p.Name+"="+string(p.API))
	}
	return strings.Join(parts, ",")
}

// ParseGatewayConfig reads and checks the gateway's file.
func ParseGatewayConfig(b []byte) (GatewayConfig, error) {
	var c GatewayConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("model gateway file: not the JSON the bot writes: %w", err)
	}
	seen := map[string]bool{}
	for i, p := range c.Providers {
		if err := checkProvider(ModelProvider{Name: p.Name, BaseURL: p.BaseURL, API: p.API}); err != nil {
			return c, fmt.Errorf("model gateway file: provider %d: %w", i, err)
		}
		if seen[p.Name] {
			return c, fmt.Errorf("model gateway file: provider %q appears twice", p.Name)
		}
		seen[p.Name] = true
	}
	return c, nil
}

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func checkProvider(p ModelProvider) error {
	if !providerName.MatchString(p.Name) {
		return fmt.Errorf("name %q: want lower-case letters, digits, - and _ (it is a URL path segment and an OpenCode provider id)", p.Name)
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("provider %s: base_url %q is not an http(s) URL without query", p.Name, p.BaseURL)
	}
	if p.API != APIOpenAI && p.API != APIAnthropic {
		return fmt.Errorf("provider %s: api %q: want %s or %s", p.Name, p.API, APIOpenAI, APIAnthropic)
	}
	return nil
}

// ParseProvider reads the compact form of a provider used by
// SANDBOX_PROVIDERS and the CLI's --provider: NAME=BASE_URL[,KEY_ENV[,API]].
func ParseProvider(s string) (ModelProvider, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || rest == "" {
		return ModelProvider{}, fmt.Errorf("provider %q: want NAME=BASE_URL[,KEY_ENV[,API]]", s)
	}
	f := strings.Split(rest, ",")
	if len(f) > 3 {
		return ModelProvider{}, fmt.Errorf("provider %q: want NAME=BASE_URL[,KEY_ENV[,API]]", s)
	}
	p := ModelProvider{Name: name, BaseURL: f[0]}
	if len(f) > 1 {
		p.KeyEnv = f[1]
	}
	if len(f) > 2 {
		p.API = ProviderAPI(f[2])
	}
	return p, nil
}

// ResolveProviders turns the operator's settings into the gateway's
// routes: every built-in provider whose key variable is in passEnv and set,
// and every configured provider (a configured name that is built in
// overrides what it sets). lookup reads the bot's environment. It returns
// the gateway's config (nil when nothing is served) and the names of
// passEnv that are not provider keys: those still reach the sandbox as
// project secrets.
func ResolveProviders(passEnv []string, configured []ModelProvider, lookup func(string) (string, bool)) (*GatewayConfig, []string, error) {
	builtins := BuiltinProviders()
	byName := map[string]int{}
	for i, p := range builtins {
		byName[p.Name] = i
	}
	var explicit []ModelProvider
	for _, c := range configured {
		p := c
		if i, ok := byName[c.Name]; ok {
			b := builtins[i]
			p.BaseURL = cmp.Or(c.BaseURL, b.BaseURL)
			p.KeyEnv = cmp.Or(c.KeyEnv, b.KeyEnv)
			p.API = cmp.Or(c.API, b.API)
		}
		p.API = cmp.Or(p.API, APIOpenAI)
		if err := checkProvider(p); err != nil {
			return nil, nil, fmt.Errorf("providers: %w", err)
		}
		if slices.ContainsFunc(explicit, func(e ModelProvider) bool { return e.Name == p.Name }) {
			return nil, nil, fmt.Errorf("providers: %q is configured twice", p.Name)
		}
		explicit = append(explicit, p)
	}
	cfg := &GatewayConfig{}
	add := func(p ModelProvider, key string) {
		cfg.Providers = append(cfg.Providers, GatewayProvider{Name: p.Name, BaseURL: p.BaseURL, API: p.API, Key: key})
	}
	for _, p := range explicit {
		key := ""
		if p.KeyEnv != "" {
			v, ok := lookup(p.KeyEnv)
			if !ok || v == "" {
				return nil, nil, fmt.Errorf("providers: %s: its key variable %s is not set in the bot's environment", p.Name, p.KeyEnv)
			}
			key = v
		}
		add(p, key)
	}
	for _, b := range builtins {
		if slices.ContainsFunc(explicit, func(e ModelProvider) bool { return e.Name == b.Name }) || !slices.Contains(passEnv, b.KeyEnv) {
			continue
		}
		if v, ok := lookup(b.KeyEnv); ok && v != "" {
			add(b, v)
		}
	}
	rest := ProjectEnv(passEnv, explicit)
	if len(cfg.Providers) == 0 {
		return nil, rest, nil
	}
	return cfg, rest, nil
}

// ProjectEnv is passEnv without the provider key variables (the built-in
// ones and those of the configured providers): what still reaches a
// sandbox's environment, for ${VAR} and the project's own code. A provider
// key never does, served or not.
func ProjectEnv(passEnv []string, configured []ModelProvider) []string {
	var rest []string
	for _, n := range passEnv {
		isKey := func(p ModelProvider) bool { return p.KeyEnv == n }
		if !slices.ContainsFunc(BuiltinProviders(), isKey) && !slices.ContainsFunc(configured, isKey) {
			rest = append(rest, n)
		}
	}
	return rest
}
