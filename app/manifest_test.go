package app

import (
	"os"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/handlers/webhook"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The manifest subscribes to exactly the events the handlers handle (GitHub
// sends installation events to every App unasked), and asks for no more
// permissions than the bot uses.
func TestManifestMatchesHandlers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../app.yml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		DefaultEvents      []string          `yaml:"default_events"`
		DefaultPermissions map[string]string `yaml:"default_permissions"`
		HookAttributes     struct {
			URL string `yaml:"url"`
		} `yaml:"hook_attributes"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	cfg := minimalConfig(t)
	base, err := handlers.NewBase(handlers.Wiring{Settings: cfg.Settings, Templates: templates.MustLoadEmbedded()})
	if err != nil {
		t.Fatal(err)
	}
	var handled []string
	for _, h := range webhook.New(base.Entry()).Handlers() {
		for _, e := range h.Handles() {
			if !strings.HasPrefix(e, "installation") {
				handled = append(handled, e)
			}
		}
	}
	sort.Strings(handled)
	events := append([]string(nil), m.DefaultEvents...)
	sort.Strings(events)
	if strings.Join(events, ",") != strings.Join(handled, ",") {
		t.Errorf("app.yml events %v, handlers handle %v", events, handled)
	}
	want := map[string]string{"contents": "write", "issues": "write", "pull_requests": "write", "checks": "write", "actions": "read",
		"statuses": "read", "metadata": "read", "members": "read"}
	for k, v := range m.DefaultPermissions {
		if want[k] != v {
			t.Errorf("app.yml asks for %s: %s, which the bot does not need", k, v)
		}
	}
	if len(m.DefaultPermissions) != len(want) {
		t.Errorf("app.yml permissions %v, want %v", m.DefaultPermissions, want)
	}
	if !strings.HasSuffix(m.HookAttributes.URL, WebhookPath) {
		t.Errorf("webhook URL %q must end with %s", m.HookAttributes.URL, WebhookPath)
	}
}
