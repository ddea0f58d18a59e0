package dispatch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestNewTaskIDIsDeterministicAndWellFormed(t *testing.T) {
	t.Parallel()
	a := dispatch.NewTaskID("acme/web", 42, dispatch.ModePlan, "delivery-1")
	if b := dispatch.NewTaskID("acme/web", 42, dispatch.ModePlan, "delivery-1"); a != b {
		t.Fatalf("same event, two ids: %s and %s (a redelivery would start a second run)", a, b)
	}
	if !dispatch.ValidTaskID(a) || len(a) != len("T-XXXXXXXX") {
		t.Fatalf("task id %q is not T- and 8 upper-case hex digits", a)
	}
	// GitHub names are case-insensitive: one repository, one id.
	if b := dispatch.NewTaskID("Acme/Web", 42, dispatch.ModePlan, "delivery-1"); a != b {
		t.Errorf("Acme/Web gives %s, acme/web %s", b, a)
	}
}

func TestNewTaskIDDiffersByEachInput(t *testing.T) {
	t.Parallel()
	base := dispatch.NewTaskID("acme/web", 42, dispatch.ModePlan, "delivery-1")
	for name, id := range map[string]string{
		"repository": dispatch.NewTaskID("acme/api", 42, dispatch.ModePlan, "delivery-1"),
		"number":     dispatch.NewTaskID("acme/web", 43, dispatch.ModePlan, "delivery-1"),
		"mode":       dispatch.NewTaskID("acme/web", 42, dispatch.ModeExecute, "delivery-1"),
		"trigger":    dispatch.NewTaskID("acme/web", 42, dispatch.ModePlan, "delivery-2"),
		// The separator keeps fields from running into each other.
		"split between repository and number": dispatch.NewTaskID("acme/web4", 2, dispatch.ModePlan, "delivery-1"),
	} {
		if id == base {
			t.Errorf("another %s gives the same id %s", name, id)
		}
		if !dispatch.ValidTaskID(id) {
			t.Errorf("%s: %q is not a task id", name, id)
		}
	}
	// Many events, no collision among them.
	seen := map[string]string{}
	for n := 1; n <= 2000; n++ {
		key := fmt.Sprintf("#%d", n)
		id := dispatch.NewTaskID("acme/web", n, dispatch.ModePlan, "d")
		if other, ok := seen[id]; ok {
			t.Fatalf("%s and %s both map to %s", other, key, id)
		}
		seen[id] = key
	}
}

func TestValidTaskID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"T-0123ABCD":  true,
		"T-FFFFFFFF":  true,
		"T-0123abcd":  false, // lower case: ids are upper-case hex
		"T-0123ABC":   false,
		"T-0123ABCDE": false,
		"X-0123ABCD":  false,
		"T-0123ABCG":  false,
		"":            false,
		"T-0123ABCD/": false,
		"../T-0123AB": false,
	} {
		if got := dispatch.ValidTaskID(id); got != want {
			t.Errorf("ValidTaskID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestSlugAndBranchName(t *testing.T) {
	t.Parallel()
	for title, want := range map[string]string{
		"Add a dark mode toggle":   "add-a-dark-mode-toggle",
		"  Fix: crash on *empty* ": "fix-crash-on-empty",
		"Ünïcödé only ✓":           "n-c-d-only",
		"!!!":                      "task",
		"":                         "task",
		"A very long title that goes on and on past forty characters": "a-very-long-title-that-goes-on-and-on-pa",
		// The cut never leaves a trailing dash.
		"abcdefghij abcdefghij abcdefghij abcdefg xyz": "abcdefghij-abcdefghij-abcdefghij-abcdefg",
	} {
		got := dispatch.Slug(title)
		if got != want {
			t.Errorf("Slug(%q) = %q, want %q", title, got, want)
		}
		if len(got) > 40 || strings.HasSuffix(got, "-") || strings.HasPrefix(got, "-") {
			t.Errorf("Slug(%q) = %q: over 40 bytes or dash at an end", title, got)
		}
	}
	if got := dispatch.BranchName("T-0123ABCD", "Add a toggle"); got != "agent/t-0123abcd-add-a-toggle" {
		t.Errorf("BranchName = %q", got)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	writes := map[dispatch.Mode]bool{
		dispatch.ModePlan: false, dispatch.ModeExecute: true, dispatch.ModeRevise: true,
		dispatch.ModeContinue: true, dispatch.ModeRebase: true, dispatch.ModeTask: false, dispatch.ModePreview: false, dispatch.ModeReview: false, dispatch.ModeFix: true, dispatch.ModeSuggest: false,
	}
	if len(dispatch.Modes) != len(writes) {
		t.Fatalf("Modes = %v; this test knows %d", dispatch.Modes, len(writes))
	}
	for _, m := range dispatch.Modes {
		if !m.Valid() {
			t.Errorf("%s is not valid", m)
		}
		if m.WritesCode() != writes[m] {
			t.Errorf("%s.WritesCode() = %v", m, m.WritesCode())
		}
	}
	for _, m := range []dispatch.Mode{"", "Plan", "deploy"} {
		if m.Valid() {
			t.Errorf("mode %q is valid", m)
		}
	}
}

func TestLockKey(t *testing.T) {
	t.Parallel()
	if got := dispatch.LockKey("acme/web", 42); got != "acme/web#42" {
		t.Errorf("LockKey = %q", got)
	}
}
