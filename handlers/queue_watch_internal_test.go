package handlers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
)

// fakeTimers is Wiring.AfterFunc with timers the test fires.
type fakeTimers struct {
	mu     sync.Mutex
	waits  []time.Duration
	funcs  []func()
	active []bool
}

func (f *fakeTimers) afterFunc(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.funcs)
	f.waits, f.funcs, f.active = append(f.waits, d), append(f.funcs, fn), append(f.active, true)
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		was := f.active[i]
		f.active[i] = false
		return was
	}
}

// fireLast fires the newest timer and returns the wait it was armed for.
func (f *fakeTimers) fireLast(t *testing.T) time.Duration {
	t.Helper()
	f.mu.Lock()
	i := len(f.funcs) - 1
	if i < 0 || !f.active[i] {
		f.mu.Unlock()
		t.Fatalf("no timer armed (%d armed in all)", len(f.funcs))
	}
	f.active[i] = false
	fn, d := f.funcs[i], f.waits[i]
	f.mu.Unlock()
	fn()
	return d
}

// A slot claimed by a bot that stopped before submitting (another
// replica, which no restart of this one resumes) holds it for its grace
// and no longer: the bot's admission arms a timer for the grace's end, on
// its clock, and admission then gives the slot back to that run first,
// without waiting for some run to end.
func TestStaleClaimIsAdmittedAgainWhenItsGraceEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := backendtest.NewMemory()
	t0 := time.UnixMilli(1_700_000_000_000)
	now := t0.Add(time.Second)
	timers := &fakeTimers{}
	c := &core{Wiring: &Wiring{Backend: mem, Settings: Settings{Caps: dispatch.Caps{Global: 1}},
		Now: func() time.Time { return now }, AfterFunc: timers.afterFunc}}
	s := &starter{c: c, runs: follow.New(follow.Deps{Logger: zerolog.Nop()}, nil)}
	var admitted []string
	s.claims = &claimWatch{c: c, fire: func() {
		got, err := s.admit(ctx)
		if err != nil {
			t.Error(err)
		}
		for _, e := range got {
			admitted = append(admitted, e.TaskID)
		}
	}}
	stale := dispatch.QueueEntry{TaskID: "T-00000001", Repo: "o/r", Number: 1, InstallationID: 1, EnqueuedAt: t0.UnixMilli(), ClaimedAt: t0.UnixMilli()}
	waiting := dispatch.QueueEntry{TaskID: "T-00000002", Repo: "o/r", Number: 2, InstallationID: 1, EnqueuedAt: t0.UnixMilli() + 1}
	if err := mem.UpdateQueue(ctx, func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error) {
		return []dispatch.QueueEntry{stale, waiting}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.admit(ctx); err != nil || len(got) != 0 {
		t.Fatalf("admission within the claim's grace = %v, %v; want nothing (the slot is held)", got, err)
	}
	now = t0.Add(dispatch.ClaimGrace)
	if d := timers.fireLast(t); d != dispatch.ClaimGrace-time.Second {
		t.Errorf("the timer was armed for %v, want the rest of the grace (%v)", d, dispatch.ClaimGrace-time.Second)
	}
	if !slices.Equal(admitted, []string{stale.TaskID}) {
		t.Fatalf("admitted %v when the grace ended, want the stale claim's run again, before the waiting one", admitted)
	}
	// Its new claim is watched in turn.
	if d := timers.fireLast(t); d != dispatch.ClaimGrace {
		t.Errorf("the next timer was armed for %v, want a whole grace", d)
	}
}
