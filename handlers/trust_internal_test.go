package handlers

import (
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func TestRefuseOncePerHour(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := &gatekeeper{c: &core{Wiring: &Wiring{Now: func() time.Time { return now }}, trust: newTrustState()}}
	if !b.refuseOnce("acme/app", 1, "mallory") {
		t.Fatal("the first refusal must be sent")
	}
	now = now.Add(59 * time.Minute)
	if b.refuseOnce("acme/app", 1, "mallory") {
		t.Error("a second refusal within the hour")
	}
	if !b.refuseOnce("acme/app", 2, "mallory") || !b.refuseOnce("acme/app", 1, "eve") {
		t.Error("another issue or another person gets their own refusal")
	}
	now = now.Add(2 * time.Minute)
	if !b.refuseOnce("acme/app", 1, "mallory") {
		t.Error("after an hour the person is told again")
	}
}

func TestFlagOverCeiling(t *testing.T) {
	t.Parallel()
	b := &starter{c: &core{Wiring: &Wiring{Settings: Settings{Limits: sandboxcfg.Limits{}.WithDefaults()}}}}
	for name, c := range map[string]struct {
		flags   sandboxcfg.Flags
		setting string
	}{
		"within":         {sandboxcfg.Flags{BudgetUSD: 10, TimeoutMinutes: 120}, ""},
		"budget over":    {sandboxcfg.Flags{BudgetUSD: 500}, "limits.max_budget_usd"},
		"timeout over":   {sandboxcfg.Flags{TimeoutMinutes: 600}, "limits.max_timeout_minutes"},
		"nothing asked":  {sandboxcfg.Flags{}, ""},
		"just above $10": {sandboxcfg.Flags{BudgetUSD: 10.01}, "limits.max_budget_usd"},
	} {
		got, over := b.flagOverCeiling("approve", c.flags)
		if over != (c.setting != "") || got.Setting != c.setting {
			t.Errorf("%s: over=%v setting=%q, want %q", name, over, got.Setting, c.setting)
		}
	}
}
