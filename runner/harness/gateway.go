package harness

import (
	"os"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// modelGateway is the sandbox's model gateway as the init announces it in
// the environment: the harnesses point their providers at it, with a dummy
// key, and never see a real one.
type modelGateway struct {
	url    string
	routes []gatewayRoute
}

type gatewayRoute struct {
	name string
	api  dispatch.ProviderAPI
}

// gatewayFromEnv reads dispatch.EnvModelGateway and EnvModelProviders from
// the agent's environment, else from this process's own (the init gives
// them to the runner, and an agent environment built from an allowlist may
// leave them out); nil when no gateway runs (the process backend, a
// developer's machine).
func gatewayFromEnv(env []string) *modelGateway {
	var url, providers string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, dispatch.EnvModelGateway+"="); ok {
			url = v
		}
		if v, ok := strings.CutPrefix(e, dispatch.EnvModelProviders+"="); ok {
			providers = v
		}
	}
	if url == "" {
		url, providers = os.Getenv(dispatch.EnvModelGateway), os.Getenv(dispatch.EnvModelProviders)
	}
	if url == "" {
		return nil
	}
	g := &modelGateway{url: strings.TrimRight(url, "/")}
	for _, p := range strings.Split(providers, ",") {
		name, api, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && name != "" {
			g.routes = append(g.routes, gatewayRoute{name: name, api: dispatch.ProviderAPI(api)})
		}
	}
	return g
}

// base is the URL of provider name at the gateway, the way the client SDK
// of its API wants it: Anthropic SDKs append /messages to a base that ends
// in /v1; ANTHROPIC_BASE_URL (Claude Code) takes the root.
func (g *modelGateway) base(r gatewayRoute, sdk bool) string {
	u := g.url + "/" + r.name
	if sdk && r.api == dispatch.APIAnthropic {
		u += "/v1"
	}
	return u
}

// anthropicEnv points Claude Code at the gateway's Anthropic route: the one
// named anthropic, else the first of the Anthropic API. Any key or base URL
// already in env is replaced.
func (g *modelGateway) anthropicEnv(env []string) []string {
	var pick *gatewayRoute
	for i, r := range g.routes {
		if r.api != dispatch.APIAnthropic {
			continue
		}
		if pick == nil || r.name == "anthropic" {
			pick = &g.routes[i]
		}
	}
	if pick == nil {
		return env
	}
	env = dotenv.Without(env, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
	return append(env, "ANTHROPIC_BASE_URL="+g.base(*pick, false), "ANTHROPIC_API_KEY="+dispatch.GatewayDummyKey)
}

// openCodeProviders is the "provider" part of OpenCode's overlay: each
// served provider's base URL at the gateway and the dummy key. OpenCode
// merges it over the operator's definition (npm package, models, prices),
// so a custom provider is defined there and only re-addressed here.
func (g *modelGateway) openCodeProviders() map[string]any {
	out := map[string]any{}
	for _, r := range g.routes {
		out[r.name] = map[string]any{"options": map[string]any{
			"baseURL": g.base(r, true),
			"apiKey":  dispatch.GatewayDummyKey,
		}}
	}
	return out
}
