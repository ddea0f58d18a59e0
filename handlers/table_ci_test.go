package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// tHead is the head of the App's PR (#2) in the table's worlds.
const tHead = "0123456789abcdef0123456789abcdef01234567"

// checksFailed makes #2's head the App's own push (its run history says
// so), turns ci.fix on and fails an Actions job there: the event that
// the checks have all completed.
func (w *world) checksFailed(t thread) event {
	w.t.Helper()
	w.repo.SandboxYML += "ci: { fix: true, fix_attempts: 2 }\n"
	w.recordHead(tHead)
	w.repo.AddActionsFailure(tHead, "test", "2026-01-01T00:00:00.0000000Z ok 1\n2026-01-01T00:00:01.0000000Z greeting: FAIL\n##[error]Process completed with exit code 1.\nPost job cleanup.\n")
	st, err := w.b.c.readChecks(w.ctx, t.gh, tHead)
	if err != nil || !st.complete() || len(st.failed) != 1 {
		w.t.Fatalf("the failing checks read as %+v (%v)", st, err)
	}
	return event{kind: lifecycle.ChecksFailed, trigger: ciTrigger(tHead), ci: &ciEvent{state: st}}
}

// recordHead makes the PR body's run history say the App's last run left
// the branch at head.
func (w *world) recordHead(head string) {
	w.t.Helper()
	section, err := w.b.c.renderHistory([]RunEntry{{TaskID: tExecTask, Mode: dispatch.ModeExecute, Attempt: 1, Status: dispatch.StatusCompleted, Head: head}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.repo.EditBody(2, func(body string) string { return spliceHistory(body, section) })
}

// The CI fix decisions past the ones the grid shows (a PR open, its head
// the App's, fix runs left): the repository did not ask, a person pushed,
// the base fails the same way, the fix runs are used up; and a redelivery
// of what was answered does nothing.
func TestChecksFailedDecisions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		want  string
	}{
		{"ci.fix off", func(w *world) { w.repo.SandboxYML = strings.Replace(w.repo.SandboxYML, "fix: true", "fix: false", 1) }, "-"},
		{"a person pushed", func(w *world) { w.recordHead("fedcba9876543210fedcba9876543210fedcba98") }, "-"},
		{"the base fails too", func(w *world) {
			w.repo.SetRef("heads/main", "base000000000000000000000000000000000000")
			w.repo.AddActionsFailure("base000000000000000000000000000000000000", "test", "##[error]broken on main\n")
		}, "reply:ci_base_failing"},
		{"another check fails on the base", func(w *world) {
			w.repo.SetRef("heads/main", "base000000000000000000000000000000000000")
			w.repo.AddActionsFailure("base000000000000000000000000000000000000", "lint", "##[error]lint\n")
		}, "run:revise"},
		{"fix runs used up", func(w *world) {
			for i, task := range []string{"T-0000C001", "T-0000C002"} {
				w.bot(2, markers.Marker{Kind: markers.KindAck, TaskID: task, Mode: dispatch.ModeRevise, Issue: 1, Branch: tBranch, CIHead: strings.Repeat(string(rune('a'+i)), 40), CIChecks: []string{"test"}}, "Fixing.")
			}
		}, "reply:ci_gave_up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			th := w.inPR(lifecycle.PROpen)
			ev := w.checksFailed(th)
			tc.setup(w)
			before := len(w.backend.Specs())
			if _, err := w.b.on(w.ctx, th, ev); err != nil {
				t.Fatalf("%v\n%s", err, w.logs.String())
			}
			if got := w.effects(before, ""); got != tc.want {
				t.Errorf("the bot did %s, want %s\n%s", got, tc.want, w.logs.String())
			}
			// The same event again (a redelivery, another replica): what
			// was answered is not answered twice.
			again := len(w.backend.Specs())
			comments := len(w.repo.Bodies(2))
			if _, err := w.b.on(w.ctx, th, ev); err != nil {
				t.Fatal(err)
			}
			if len(w.backend.Specs()) != again || len(w.repo.Bodies(2)) != comments {
				t.Errorf("a redelivered event did something: %d runs (was %d), %d comments (was %d)", len(w.backend.Specs()), again, len(w.repo.Bodies(2)), comments)
			}
		})
	}
}

// The fix run's work order: revise mode on the PR's branch, a task id
// derived from the head, and the failure as GitHub reported it: the
// check's name, its workflow and failing step, its annotation and the
// tail of its log up to the error (the job's clean-up left out).
func TestCIFixRunCarriesTheFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	th := w.inPR(lifecycle.PROpen)
	if _, err := w.b.on(w.ctx, th, w.checksFailed(th)); err != nil {
		t.Fatalf("%v\n%s", err, w.logs.String())
	}
	specs := w.backend.Specs()
	if len(specs) != 1 {
		t.Fatalf("%d runs, want the fix run\n%s", len(specs), w.logs.String())
	}
	o := specs[0].Order
	if o.Mode != dispatch.ModeRevise || o.TargetBranch != tBranch || o.TaskID != dispatch.NewTaskID(tRepo, 2, dispatch.ModeRevise, ciTrigger(tHead)) {
		t.Errorf("the fix run is a %s run of %s on %q", o.Mode, o.TaskID, o.TargetBranch)
	}
	if o.CI == nil || len(o.CI.Failures) != 1 || o.CI.HeadSHA != tHead || o.CI.Attempt != 1 || o.CI.Attempts != 2 {
		t.Fatalf("CI report %+v", o.CI)
	}
	f := o.CI.Failures[0]
	if f.Name != "test" || f.Kind != "actions" || f.Workflow != "CI" || f.Step != "Test" || len(f.Annotations) != 1 || f.Annotations[0].Path != "greet.txt" {
		t.Errorf("the failure %+v", f)
	}
	if !strings.Contains(f.LogTail, "greeting: FAIL\n##[error]Process completed") || strings.Contains(f.LogTail, "cleanup") || strings.Contains(f.LogTail, "2026-01-01T") {
		t.Errorf("the log tail %q", f.LogTail)
	}
	ack := w.repo.Bodies(2)
	if last := ack[len(ack)-1]; !strings.Contains(last, "Fixing the failing checks `test`") || !strings.Contains(last, `"ci_head":"`+tHead) {
		t.Errorf("the acknowledgement:\n%s", last)
	}
}

// Failing checks on a PR a run holds wait for it, as review batches do,
// and are looked at again once it has ended.
func TestChecksFailedWaitForTheRunHoldingThePR(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.b.ReviewBatchWindow = 20 * time.Millisecond
	th := w.inPR(lifecycle.Revising)
	if _, err := w.b.on(w.ctx, th, w.checksFailed(th)); err != nil {
		t.Fatal(err)
	}
	if w.backend.LockHolder(ciWaitKey(tRepo, 2)) == "" || len(w.backend.Specs()) != 1 {
		t.Fatalf("the failing checks must wait for %s\n%s", tHeld, w.logs.String())
	}
	// The revise run ends without pushing: the head's failure is still
	// the App's, and its fix run starts.
	w.bot(2, markers.Marker{Kind: markers.KindResult, TaskID: tHeld, Mode: dispatch.ModeRevise, Issue: 1, Branch: tBranch}, "Done.")
	w.backend.Finish(tHeld, &dispatch.Result{SchemaVersion: dispatch.ResultVersion, TaskID: tHeld, Mode: dispatch.ModeRevise, Status: dispatch.StatusCompleted})
	if err := w.backend.Unlock(w.ctx, dispatch.LockKey(tRepo, 2), tHeld); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	if _, err := w.backend.WaitSubmitted(ctx, 2); err != nil {
		t.Fatalf("no fix run after the run ended: %v\n%s", err, w.logs.String())
	}
	if o := w.backend.Specs()[1].Order; o.CI == nil || o.Mode != dispatch.ModeRevise {
		t.Errorf("the run after the wait is %s with CI %v", o.Mode, o.CI)
	}
}
