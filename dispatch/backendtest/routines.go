package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// RunRoutineBooks checks the routine-book contract on a store that
// newBooks makes fresh for each check, as two handles on one shared
// state (two bot replicas, or a bot before and after a restart).
func RunRoutineBooks(t *testing.T, newBooks func(t *testing.T) (dispatch.RoutineBooks, dispatch.RoutineBooks)) {
	for _, c := range routineChecks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b := newBooks(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c.run(t, ctx, a, b)
		})
	}
}

var routineChecks = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, a, b dispatch.RoutineBooks)
}{
	{"ReadWrite", testRoutineReadWrite},
	{"TickOnce", testRoutineTickOnce},
	{"TriggerOnce", testRoutineTriggerOnce},
}

// testRoutineBooks runs the routine-book checks on a backend, the one
// handle playing both replicas; each check uses repositories of its own.
func testRoutineBooks(t *testing.T, c *check) {
	for _, rc := range routineChecks {
		t.Run(rc.name, func(t *testing.T) { rc.run(t, c.ctx, c.b, c.b) })
	}
}

// A book starts empty, is what was last written, is the same under either
// case of the repository's name, and a change returning nil writes
// nothing.
func testRoutineReadWrite(t *testing.T, ctx context.Context, a, b dispatch.RoutineBooks) {
	repo := "Acme/ReadWrite"
	if got, err := b.ReadRoutineBook(ctx, repo); err != nil || got != nil {
		t.Fatalf("ReadRoutineBook of a new repository = %q, %v; want nil", got, err)
	}
	if err := a.UpdateRoutineBook(ctx, repo, func(cur []byte) ([]byte, error) { return []byte(`{"x":{}}`), nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateRoutineBook(ctx, "acme/readwrite", func(cur []byte) ([]byte, error) {
		if string(cur) != `{"x":{}}` {
			t.Errorf("the change saw %q, want what was written", cur)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	if err := a.UpdateRoutineBook(ctx, repo, func([]byte) ([]byte, error) { return []byte("{}"), refused }); !errors.Is(err, refused) {
		t.Errorf("a change's error = %v, want it returned", err)
	}
	if got, err := b.ReadRoutineBook(ctx, "ACME/readwrite"); err != nil || string(got) != `{"x":{}}` {
		t.Errorf("ReadRoutineBook = %q, %v; want the first write only", got, err)
	}
	if got, err := b.ReadRoutineBook(ctx, "acme/other"); err != nil || got != nil {
		t.Errorf("another repository's book = %q, %v; want none", got, err)
	}
}

// Two replicas racing for the same ticks: each tick is claimed exactly
// once, an older tick never after a newer one.
func testRoutineTickOnce(t *testing.T, ctx context.Context, a, b dispatch.RoutineBooks) {
	repo := "acme/ticks"
	const ticks = 8
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for i, books := range []dispatch.RoutineBooks{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ticks {
				tick := fmt.Sprintf("2026-11-01T01:%02d", n)
				_, err := dispatch.ClaimTick(ctx, books, repo, "nightly", tick, fmt.Sprintf("replica-%d", i), time.Now())
				switch {
				case err == nil, errors.Is(err, dispatch.ErrBusy): // taken, while the first one is acted on
					mu.Lock()
					won[tick]++
					mu.Unlock()
				case !errors.Is(err, dispatch.ErrClaimed):
					t.Errorf("ClaimTick %s: %v", tick, err)
				}
			}
		}()
	}
	wg.Wait()
	for tick, n := range won {
		if n != 1 {
			t.Errorf("tick %s claimed %d times", tick, n)
		}
	}
	if _, ok := won[fmt.Sprintf("2026-11-01T01:%02d", ticks-1)]; !ok {
		t.Errorf("the last tick was never claimed: %v", won)
	}
	if _, err := dispatch.ClaimTick(ctx, a, repo, "nightly", "2026-11-01T01:00", "late", time.Now()); !errors.Is(err, dispatch.ErrClaimed) {
		t.Errorf("an older tick after a newer one: %v, want ErrClaimed", err)
	}
	book, err := dispatch.ReadRoutines(ctx, b, repo)
	if err != nil || book["nightly"].Tick != fmt.Sprintf("2026-11-01T01:%02d", ticks-1) || book["nightly"].Busy == 0 {
		t.Errorf("book = %+v, %v; want the last tick, busy", book, err)
	}
	// Once the first claim's result is recorded, the next tick is acted on.
	if err := dispatch.Done(ctx, a, repo, "nightly", "opened #1", nil); err != nil {
		t.Fatal(err)
	}
	if st, err := dispatch.ClaimTick(ctx, b, repo, "nightly", "2026-11-01T02:00", "r", time.Now()); err != nil || st.Busy == 0 || st.Result != "opened #1" {
		t.Errorf("the tick after a recorded result: %+v, %v; want it taken and busy", st, err)
	}
}

// A one-off trigger (a /run comment delivered to both replicas) is
// claimed once; other routines' triggers are their own.
func testRoutineTriggerOnce(t *testing.T, ctx context.Context, a, b dispatch.RoutineBooks) {
	repo := "acme/triggers"
	var wins sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, books := range []dispatch.RoutineBooks{a, b, a, b} {
		wins.Add(1)
		go func() {
			defer wins.Done()
			_, err := dispatch.ClaimTrigger(ctx, books, repo, "weekly-deps", "run-4242", "r", time.Now())
			if err == nil {
				mu.Lock()
				n++
				mu.Unlock()
			} else if !errors.Is(err, dispatch.ErrClaimed) {
				t.Errorf("ClaimTrigger: %v", err)
			}
		}()
	}
	wins.Wait()
	if n != 1 {
		t.Errorf("the trigger was claimed %d times, want once", n)
	}
	if _, err := dispatch.ClaimTrigger(ctx, b, repo, "docs", "run-4242", "r", time.Now()); err != nil {
		t.Errorf("another routine's trigger of the same id: %v", err)
	}
}
