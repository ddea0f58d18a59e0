package follow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub/hubtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
	"github.com/sandbox-bot/sandbox-bot/templates"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// A progress edit the pacer deferred (hub.Deferrable, app's pacer) is
// not lost: the next progress line sends it at once, without waiting for
// the interval, and the comment shows the latest line. The progress
// comment's creation is not deferrable: a run shows from its start.
func TestDeferredProgressGoesWithTheNextLine(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Hour)
	p := w.planProgress(t)
	shows := func(want string) bool {
		got := w.repo.Bodies(1)
		return len(got) == 1 && strings.Contains(got[0], want)
	}
	p.update(dispatch.Progress{Stage: "agent", Message: "reading the code"})
	if !shows("reading the code") {
		t.Fatalf("the first line made no progress comment: %q", w.repo.Bodies(1))
	}
	p.mu.Lock()
	p.lastSent = time.Time{} // the interval has passed
	p.mu.Unlock()
	w.hub.FailNext("EditComment", hub.ErrWriteDeferred)
	p.update(dispatch.Progress{Stage: "agent", Message: "writing the plan"})
	if !shows("reading the code") {
		t.Fatalf("a deferred edit changed the comment: %q", w.repo.Bodies(1))
	}
	p.update(dispatch.Progress{Stage: "agent", Message: "still writing"})
	if !shows("still writing") {
		t.Fatalf("after a deferred edit, the next line (an hour's interval not passed) did not edit the comment: %q", w.repo.Bodies(1))
	}
	p.update(dispatch.Progress{Stage: "agent", Message: "almost done"})
	if shows("almost done") {
		t.Fatalf("a sent edit must hold the interval again: %q", w.repo.Bodies(1))
	}
	if !strings.Contains(w.logs.String(), "deferred") || strings.Contains(w.logs.String(), `"level":"warn"`) {
		t.Fatalf("a deferred edit is logged at debug, not as a warning:\n%s", w.logs.String())
	}
}

// A deferred edit with no progress line after it is tried again after the
// interval (at least a second): a quiet agent's last step still shows.
func TestDeferredProgressIsTriedAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Millisecond)
	p := w.planProgress(t)
	p.update(dispatch.Progress{Stage: "agent", Message: "reading the code"})
	p.mu.Lock()
	p.lastSent = time.Time{} // the interval has passed
	p.mu.Unlock()
	w.hub.FailNext("EditComment", hub.ErrWriteDeferred)
	p.update(dispatch.Progress{Stage: "agent", Message: "the last step"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.repo.Bodies(1)
		if len(got) == 1 && strings.Contains(got[0], "the last step") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deferred edit was not tried again: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Complete(w.ctx, "success", "Plan ready", "", nil)
	if got := w.repo.Bodies(1); len(got) != 1 || strings.Contains(got[0], "the last step") {
		t.Fatalf("the progress comment's last edit is the run's end: %q", got)
	}
}

const tRepo = "acme/app"

// world is a follower on GitHub in memory, with one issue (#1).
type world struct {
	ctx  context.Context
	hub  *hubtest.Hub
	repo *hubtest.Repo
	r    *Runs
	logs *testenv.Log
}

func newWorld(t *testing.T, interval time.Duration) *world {
	t.Helper()
	h := hubtest.New()
	repo := h.Named(tRepo)
	repo.AddIssue("maya", "Do it", "Please.", nil)
	logs := &testenv.Log{}
	logger := zerolog.New(logs).Level(zerolog.DebugLevel)
	r := New(Deps{Hub: h, Backend: backendtest.NewMemory(), Templates: templates.MustLoadEmbedded(), Secrets: sanitize.NewSecrets(),
		Logger: logger, Now: time.Now, Links: pages{}, CheckName: "sandbox-bot", ProgressInterval: interval, TokenRefresh: time.Hour,
		WebURL: "https://github.com"}, nil)
	t.Cleanup(r.Stop)
	return &world{ctx: logger.WithContext(t.Context()), hub: h, repo: repo, r: r, logs: logs}
}

// planProgress is the progress of a plan run of #1.
func (w *world) planProgress(t *testing.T) *Progress {
	t.Helper()
	gh, err := w.hub.Repo(1, tRepo)
	if err != nil {
		t.Fatal(err)
	}
	meta := dispatch.Meta{TaskID: "T-0000000000000def", Repo: tRepo, Number: 1, Mode: dispatch.ModePlan, InstallationID: 1, Attempt: 1}
	return w.r.Progress(w.ctx, gh, meta)
}

// pages are the links of a bot that serves pages.
type pages struct{}

func (pages) LiveURL(taskID string) string  { return "https://bot.example/runs/" + taskID }
func (pages) EntryURL(taskID string) string { return "https://bot.example/?task=" + taskID }
