package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/templates"
)

// NewBase sets no defaults of its own: settings left unset are an error
// naming each of them, not silently filled with a second copy of the
// configuration's defaults.
func TestNewBaseRefusesUnsetSettings(t *testing.T) {
	t.Parallel()
	b, err := NewBase(Wiring{Settings: Settings{TriggerLabel: "agent"}, Templates: templates.MustLoadEmbedded()})
	if err == nil {
		t.Fatalf("NewBase took zero settings: %+v", b.Settings)
	}
	for _, name := range []string{"MaxContinues", "MaxPlanRounds", "ProgressInterval", "TokenRefresh", "DispatchDeadline", "CheckName", "WebURL", "Isolation", "Limits.MaxBudgetUSD", "Limits.PidsLimit"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "TriggerLabel") {
		t.Errorf("error %q names TriggerLabel, which was set", err)
	}
}
