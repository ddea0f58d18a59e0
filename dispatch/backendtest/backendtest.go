// Package backendtest checks that a dispatch.Backend keeps the contract the
// bot relies on, in the style of testing/fstest: each backend's own tests
// call Run with a way to make a fresh backend and its runner, so the
// backends cannot drift apart (create-only submission, the errors callers
// branch on, cancel, token refresh, the per-issue lock, the run queue, the routines'
// claims).
// Like fstest's MapFS, it also holds Memory, the backend in memory that
// the bot's tests use in place of a real one.
package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Run checks the backend newBackend makes, one fresh backend per check.
// The checks run in parallel; a newBackend whose backends share something
// (one Docker engine) serializes them itself.
func Run(t *testing.T, newBackend func(t *testing.T) Harness) {
	checks := []struct {
		name string
		run  func(*testing.T, *check)
	}{
		{"SubmitIsCreateOnly", testSubmitIsCreateOnly},
		{"UnknownTaskIsNotFound", testUnknownTaskIsNotFound},
		{"ResultWhileRunning", testResultWhileRunning},
		{"WaitReplaysFromTheStart", testWaitReplaysFromTheStart},
		{"EndWithoutReceipt", testEndWithoutReceipt},
		{"CancelLeavesInterruptedReceipt", testCancelLeavesInterruptedReceipt},
		{"TokenRefresh", testTokenRefresh},
		{"LockHolder", testLockHolder},
		{"Queue", testQueue},
		{"RoutineBooks", testRoutineBooks},
		{"Artifacts", testArtifacts},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newBackend(t)
			if h.Timeout == 0 {
				h.Timeout = 2 * time.Minute
			}
			ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
			defer cancel()
			c.run(t, &check{Harness: h, b: h.Backend, ctx: ctx})
		})
	}
}

// check is one check's backend and deadline.
type check struct {
	Harness
	b   dispatch.Backend
	ctx context.Context
}

// submit starts a run of behaviour and removes it when the check ends.
func (c *check) submit(t *testing.T, behavior Behavior) dispatch.RunSpec {
	t.Helper()
	spec := c.Spec(behavior)
	created, err := c.b.Submit(c.ctx, spec)
	if err != nil || !created {
		t.Fatalf("%s: Submit(%s) = %v, %v; want created", c.b.Name(), spec.Meta.TaskID, created, err)
	}
	t.Cleanup(func() {
		id := spec.Meta.TaskID
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if st, err := c.b.Status(ctx, id); err == nil && !st.State.Ended() {
			c.Release(id)
			c.b.Cancel(ctx, id)
			c.b.Wait(ctx, id, nil)
		}
		if err := c.b.Cleanup(ctx, id); err != nil {
			t.Errorf("%s: Cleanup(%s): %v", c.b.Name(), id, err)
		}
	})
	return spec
}

// started waits until the run's runner has started, so that a cancel is
// handled by the runner and not lost before it could be.
func (c *check) started(t *testing.T, id string) {
	t.Helper()
	if !c.Progress {
		c.until(t, id+" running", func() bool {
			st, err := c.b.Status(c.ctx, id)
			return err == nil && st.State == dispatch.StateRunning
		})
		return
	}
	ctx, stop := context.WithCancel(c.ctx)
	defer stop()
	var once sync.Once
	agent := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.b.Wait(ctx, id, func(p dispatch.Progress) {
			if p.Stage == "agent" {
				once.Do(func() { close(agent) })
			}
		})
		done <- err
	}()
	select {
	case <-agent:
		stop()
		<-done
	case err := <-done:
		t.Fatalf("%s: %s ended (Wait: %v) before its agent started", c.b.Name(), id, err)
	}
}

// wait waits for the run's end.
func (c *check) wait(t *testing.T, id string) dispatch.RunStatus {
	t.Helper()
	st, err := c.b.Wait(c.ctx, id, nil)
	if err != nil {
		t.Fatalf("%s: Wait(%s): %v", c.b.Name(), id, err)
	}
	if !st.State.Ended() {
		t.Fatalf("%s: Wait(%s) returned %s, not an ended state", c.b.Name(), id, st.State)
	}
	return st
}

// until polls cond until it holds or the check's deadline passes.
func (c *check) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-c.ctx.Done():
			t.Fatalf("%s: gave up waiting for %s: %v", c.b.Name(), what, c.ctx.Err())
		case <-tick.C:
		}
	}
}

func testSubmitIsCreateOnly(t *testing.T, c *check) {
	spec := c.submit(t, Hold)
	id := spec.Meta.TaskID
	// A redelivered webhook, or a second replica: same task id, no second
	// sandbox, no error.
	if created, err := c.b.Submit(c.ctx, spec); err != nil || created {
		t.Fatalf("second Submit(%s) = %v, %v; want false, nil", id, created, err)
	}
	st, err := c.b.Status(c.ctx, id)
	if err != nil || st.State.Ended() || st.Meta.TaskID != id {
		t.Fatalf("Status(%s) = %+v, %v; want the run, not ended", id, st, err)
	}
	list, err := c.b.List(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range list {
		if r.Meta.TaskID == id {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("List has %s %d times, want once: %+v", id, n, list)
	}
	c.Release(id)
	if st := c.wait(t, id); st.State != dispatch.StateComplete || st.ExitCode != 0 {
		t.Fatalf("end of %s = %+v, want complete with exit code 0", id, st)
	}
}

func testUnknownTaskIsNotFound(t *testing.T, c *check) {
	const id = "T-0BADF00D"
	if _, err := c.b.Status(c.ctx, id); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Status of an unknown task = %v, want ErrNotFound", err)
	}
	if _, err := c.b.Wait(c.ctx, id, nil); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Wait for an unknown task = %v, want ErrNotFound", err)
	}
	if _, err := c.b.Result(c.ctx, id); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Result of an unknown task = %v, want ErrNotFound", err)
	}
	if err := c.b.Cancel(c.ctx, id); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Cancel of an unknown task = %v, want ErrNotFound", err)
	}
	if err := c.b.RefreshToken(c.ctx, id, "ghs_unknown"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("RefreshToken of an unknown task = %v, want ErrNotFound", err)
	}
	if _, ok := c.Token(id); ok {
		t.Errorf("RefreshToken of an unknown task left a token")
	}
	// Cleanup runs again after a restart: a run already gone is fine.
	if err := c.b.Cleanup(c.ctx, id); err != nil {
		t.Errorf("Cleanup of an unknown task = %v, want nil", err)
	}
}

func testResultWhileRunning(t *testing.T, c *check) {
	id := c.submit(t, Hold).Meta.TaskID
	// Pending or running: not a result, and not "no result" either (the
	// bot would report a run that is still going as lost).
	if _, err := c.b.Result(c.ctx, id); !errors.Is(err, dispatch.ErrRunning) {
		t.Errorf("Result right after Submit = %v, want ErrRunning", err)
	}
	c.started(t, id)
	if _, err := c.b.Result(c.ctx, id); !errors.Is(err, dispatch.ErrRunning) {
		t.Errorf("Result while running = %v, want ErrRunning", err)
	}
	c.Release(id)
	c.wait(t, id)
	res, err := c.b.Result(c.ctx, id)
	if err != nil {
		t.Fatalf("Result after the end: %v", err)
	}
	if res.TaskID != id || res.Status != dispatch.StatusCompleted || res.SchemaVersion != dispatch.ResultVersion {
		t.Errorf("result = %+v, want %s completed", res, id)
	}
}

// testWaitReplaysFromTheStart: a Wait begun while the run goes on gets
// every progress line from the run's start, in order, and so does one
// begun after its end while the backend still holds it: what a live page
// opened late, on another replica or after a restart, reads.
func testWaitReplaysFromTheStart(t *testing.T, c *check) {
	if !c.Progress {
		t.Skipf("%s reports no progress lines", c.b.Name())
	}
	id := c.submit(t, Hold).Meta.TaskID
	c.started(t, id)
	var mu sync.Mutex
	var late []string
	sawAgent := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := c.b.Wait(c.ctx, id, func(p dispatch.Progress) {
			mu.Lock()
			late = append(late, p.Stage+": "+p.Message)
			mu.Unlock()
			if p.Stage == "agent" {
				once.Do(func() { close(sawAgent) })
			}
		})
		done <- err
	}()
	select {
	case <-sawAgent: // a line written before this Wait began
	case err := <-done:
		t.Fatalf("%s: a Wait begun mid-run ended (%v) without the lines before it", c.b.Name(), err)
	case <-c.ctx.Done():
		t.Fatalf("%s: a Wait begun mid-run got no line written before it", c.b.Name())
	}
	c.Release(id)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var after []string
	if _, err := c.b.Wait(c.ctx, id, func(p dispatch.Progress) { after = append(after, p.Stage+": "+p.Message) }); err != nil {
		t.Fatalf("Wait after the end: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(late) == 0 || !slices.Equal(late, after) {
		t.Errorf("%s: lines read mid-run %q, after the end %q; want the same lines from the start", c.b.Name(), late, after)
	}
}

func testEndWithoutReceipt(t *testing.T, c *check) {
	id := c.submit(t, NoReceipt).Meta.TaskID
	c.started(t, id)
	c.Release(id)
	c.wait(t, id)
	if res, err := c.b.Result(c.ctx, id); !errors.Is(err, dispatch.ErrNoResult) {
		t.Errorf("Result of a run that left no receipt = %+v, %v; want ErrNoResult", res, err)
	}
}

func testCancelLeavesInterruptedReceipt(t *testing.T, c *check) {
	spec := c.submit(t, Hold)
	id := spec.Meta.TaskID
	c.started(t, id)
	if err := c.b.Cancel(c.ctx, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	st := c.wait(t, id)
	res, err := c.b.Result(c.ctx, id)
	if err != nil {
		t.Fatalf("Result after Cancel (status %+v): %v", st, err)
	}
	if res.TaskID != id || res.Status != dispatch.StatusInterrupted {
		t.Errorf("result after Cancel = %+v, want %s interrupted", res, id)
	}
	// A second Cancel of an ended run does no harm.
	if err := c.b.Cancel(c.ctx, id); err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Cancel of an ended run: %v", err)
	}
}

func testTokenRefresh(t *testing.T, c *check) {
	spec := c.submit(t, Hold)
	id := spec.Meta.TaskID
	if tok, ok := c.Token(id); !ok || tok != spec.Token {
		t.Fatalf("token after Submit = %q, %v; want the spec's", tok, ok)
	}
	c.started(t, id)
	const fresh = "ghs_conformanceFreshToken000000000001"
	if err := c.b.RefreshToken(c.ctx, id, fresh); err != nil {
		t.Fatalf("RefreshToken while running: %v", err)
	}
	if tok, ok := c.Token(id); !ok || tok != fresh {
		t.Fatalf("token after refresh = %q, %v; want the fresh one", tok, ok)
	}
	c.Release(id)
	c.wait(t, id)

	// After the end: an error (the run will not read it), and the late
	// token is written nowhere.
	const late = "ghs_conformanceLateToken0000000000002"
	if err := c.b.RefreshToken(c.ctx, id, late); err == nil {
		t.Error("RefreshToken after the end succeeded; it must say the run has ended")
	}
	if tok, ok := c.Token(id); ok && tok == late {
		t.Error("RefreshToken after the end wrote the token")
	}
	if err := c.b.Cleanup(c.ctx, id); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if tok, ok := c.Token(id); ok {
		t.Errorf("a token (%d bytes) is left after Cleanup", len(tok))
	}
	// Not found, or ended: a backend may keep the stopped run readable
	// (Nomad leaves it to its job GC unless told to purge).
	if err := c.b.RefreshToken(c.ctx, id, late); err == nil {
		t.Error("RefreshToken after Cleanup succeeded")
	}
	if _, ok := c.Token(id); ok {
		t.Error("RefreshToken after Cleanup left a token")
	}
}

func testLockHolder(t *testing.T, c *check) {
	ctx, b := c.ctx, c.b
	key := dispatch.LockKey("Acme/Web", 42)
	if h, err := b.Holder(ctx, key); err != nil || h != "" {
		t.Fatalf("Holder of a free lock = %q, %v; want \"\"", h, err)
	}
	if h, err := b.Lock(ctx, key, "T-00000001"); err != nil || h != "T-00000001" {
		t.Fatalf("Lock = %q, %v", h, err)
	}
	// Holder only looks: asking twice takes nothing.
	for range 2 {
		if h, err := b.Holder(ctx, key); err != nil || h != "T-00000001" {
			t.Fatalf("Holder = %q, %v; want T-00000001", h, err)
		}
	}
	// Re-entrant: the holder taking it again succeeds.
	if h, err := b.Lock(ctx, key, "T-00000001"); err != nil || h != "T-00000001" {
		t.Fatalf("Lock again by the holder = %q, %v", h, err)
	}
	// GitHub names are case-insensitive: another spelling is the same lock.
	other := dispatch.LockKey("acme/web", 42)
	if h, err := b.Lock(ctx, other, "T-00000002"); !errors.Is(err, dispatch.ErrLocked) || h != "T-00000001" {
		t.Fatalf("Lock by another task = %q, %v; want T-00000001, ErrLocked", h, err)
	}
	if h, err := b.Holder(ctx, other); err != nil || h != "T-00000001" {
		t.Fatalf("Holder under another spelling = %q, %v", h, err)
	}
	// Unlock by a task that does not hold it: no error, lock untouched.
	if err := b.Unlock(ctx, key, "T-00000002"); err != nil {
		t.Fatalf("Unlock by a non-holder: %v", err)
	}
	if h, err := b.Holder(ctx, key); err != nil || h != "T-00000001" {
		t.Fatalf("Holder after an Unlock by a non-holder = %q, %v", h, err)
	}
	// Another issue is another lock.
	if h, err := b.Lock(ctx, dispatch.LockKey("acme/web", 43), "T-00000003"); err != nil || h != "T-00000003" {
		t.Fatalf("Lock of another issue = %q, %v", h, err)
	}
	if err := b.Unlock(ctx, key, "T-00000001"); err != nil {
		t.Fatalf("Unlock by the holder: %v", err)
	}
	if h, err := b.Holder(ctx, key); err != nil || h != "" {
		t.Fatalf("Holder after Unlock = %q, %v; want \"\"", h, err)
	}
	if err := b.Unlock(ctx, key, "T-00000001"); err != nil {
		t.Fatalf("Unlock of a free lock: %v", err)
	}
	if h, err := b.Lock(ctx, key, "T-00000002"); err != nil || h != "T-00000002" {
		t.Fatalf("Lock after release = %q, %v", h, err)
	}
	if h, _ := b.Holder(ctx, dispatch.LockKey("acme/web", 43)); h != "T-00000003" {
		t.Fatalf("the other issue's lock changed hands: %q", h)
	}
}
