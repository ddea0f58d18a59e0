package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The gateway puts the operator's key on a request: it forwards only the
// model endpoints the harnesses use, so the agent cannot spend that key on
// a provider's files, batches, fine-tunes, assistants or admin API.

// endpoint is one method and path (relative to the provider's base URL)
// the gateway forwards; a path ending in "/*" takes one more segment (a
// model's id).
type endpoint struct{ method, path string }

// endpoints are the model endpoints per wire protocol. OpenAI-compatible
// base URLs end in /v1 (or the like); Anthropic's is the API root.
var endpoints = map[dispatch.ProviderAPI][]endpoint{
	dispatch.APIOpenAI: {
		{http.MethodPost, "/chat/completions"},
		{http.MethodPost, "/responses"},
		{http.MethodGet, "/models"},
		{http.MethodGet, "/models/*"},
	},
	dispatch.APIAnthropic: {
		{http.MethodPost, "/v1/messages"},
		{http.MethodPost, "/v1/messages/count_tokens"},
		{http.MethodGet, "/v1/models"},
		{http.MethodGet, "/v1/models/*"},
	},
}

// droppedHeaders never reach a provider: the organisation and project a
// request is billed to (and whose data it sees) are the operator's
// choice, made with the key, not the agent's.
var droppedHeaders = []string{"OpenAI-Organization", "OpenAI-Project"}

// allowed says whether method and p (cleaned, relative to the base URL)
// is a model endpoint of api, and if not, the error to answer.
func allowed(api dispatch.ProviderAPI, method, p string) error {
	if api == "" {
		api = dispatch.APIOpenAI
	}
	list := endpoints[api]
	for _, e := range list {
		if method != e.method && !(method == http.MethodHead && e.method == http.MethodGet) {
			continue
		}
		if prefix, ok := strings.CutSuffix(e.path, "/*"); ok {
			rest, found := strings.CutPrefix(p, prefix+"/")
			if found && rest != "" && !strings.Contains(rest, "/") {
				return nil
			}
			continue
		}
		if p == e.path {
			return nil
		}
	}
	var names []string
	for _, e := range list {
		names = append(names, e.method+" "+e.path)
	}
	return fmt.Errorf("model gateway: %s %s is not forwarded: the gateway passes only the model endpoints of a %s provider (%s), so the operator's key is used for nothing else",
		method, p, api, strings.Join(names, ", "))
}
