package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A progress update the pacer deferred (handlers.Deferrable, app's pacer)
// is not lost: the next progress line sends it at once, without waiting
// for the interval, and the last state is what the comment shows.
func TestDeferredProgressGoesWithTheNextLine(t *testing.T) {
	t.Parallel()
	w := newWorld(t) // ProgressInterval: an hour
	meta := dispatch.Meta{TaskID: "T-0000000000000def", Repo: tRepo, Number: 1, Mode: dispatch.ModePlan, InstallationID: 1, Attempt: 1}
	gh, err := w.hub.Repo(1, tRepo)
	if err != nil {
		t.Fatal(err)
	}
	p := newProgress(w.ctx, w.b.core, gh, meta)
	w.hub.failNext("Comment", ErrWriteDeferred)
	p.update(dispatch.Progress{Stage: "agent", Message: "reading the code"})
	if got := w.repo.bodies(1); len(got) != 0 {
		t.Fatalf("a deferred progress comment reached GitHub: %q", got)
	}
	p.update(dispatch.Progress{Stage: "agent", Message: "writing the plan"})
	got := w.repo.bodies(1)
	if len(got) != 1 || !strings.Contains(got[0], "writing the plan") {
		t.Fatalf("after a deferred update, the next line (an hour's interval not passed) posted %q, want one progress comment with it", got)
	}
	p.update(dispatch.Progress{Stage: "agent", Message: "still writing"})
	if got := w.repo.bodies(1); strings.Contains(got[0], "still writing") {
		t.Fatalf("a sent update must hold the interval again: %q", got)
	}
	if !strings.Contains(w.logs.String(), "deferred") || strings.Contains(w.logs.String(), `"level":"warn"`) {
		t.Fatalf("a deferred update is logged at debug, not as a warning:\n%s", w.logs.String())
	}
}
