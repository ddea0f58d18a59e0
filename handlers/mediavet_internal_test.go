package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The sandbox writes the media notes and the tool names: notes are
// redacted, sanitized and bounded; only plain tool names with a positive
// count are kept.
func TestVetMediaAndTools(t *testing.T) {
	t.Parallel()
	res := &dispatch.Result{
		Tools: map[string]int{"browser_take_snapshot": 2, "mcp__browser__click": 1, "bad name](x)": 5, "bash": -3},
	}
	for i := 0; i < 30; i++ {
		res.MediaOmitted = append(res.MediaOmitted, "shot.png: SECRET <img src=x> is over the cap")
	}
	cp := *res
	vetMediaAndTools(&cp, res, func(s string) string { return strings.ReplaceAll(s, "SECRET", "[REDACTED]") })
	if len(cp.Tools) != 2 || cp.Tools["browser_take_snapshot"] != 2 || cp.Tools["mcp__browser__click"] != 1 {
		t.Fatalf("tools = %v, want only the two plain names", cp.Tools)
	}
	if cp.BrowserCalls() != 3 {
		t.Fatalf("browser calls = %d, want 3", cp.BrowserCalls())
	}
	if len(cp.MediaOmitted) != maxMediaNotes {
		t.Fatalf("%d notes kept, want %d", len(cp.MediaOmitted), maxMediaNotes)
	}
	if n := cp.MediaOmitted[0]; strings.Contains(n, "SECRET") || strings.Contains(n, "<img") {
		t.Fatalf("note not redacted and sanitized: %q", n)
	}
}
