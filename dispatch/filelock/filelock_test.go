package filelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestLockUnlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := New(t.TempDir(), zerolog.Nop())
	if h, err := d.Lock(ctx, "Octo/Repo#1", "T-1"); err != nil || h != "T-1" {
		t.Fatalf("first lock: %q %v", h, err)
	}
	if h, err := d.Lock(ctx, "octo/repo#1", "T-1"); err != nil || h != "T-1" {
		t.Fatalf("re-lock by the holder (names are case-insensitive): %q %v", h, err)
	}
	if h, err := d.Lock(ctx, "octo/repo#1", "T-2"); !errors.Is(err, dispatch.ErrLocked) || h != "T-1" {
		t.Fatalf("contended lock: %q %v", h, err)
	}
	if err := d.Unlock(ctx, "octo/repo#1", "T-2"); err != nil {
		t.Fatalf("unlock by a non-holder: %v", err)
	}
	if h, err := d.Holder(ctx, "OCTO/repo#1"); err != nil || h != "T-1" {
		t.Fatalf("unlock by a non-holder must leave the lock: holder %q %v", h, err)
	}
	if err := d.Unlock(ctx, "octo/repo#1", "T-1"); err != nil {
		t.Fatal(err)
	}
	if h, err := d.Holder(ctx, "octo/repo#1"); err != nil || h != "" {
		t.Fatalf("holder after release: %q %v", h, err)
	}
	if h, err := d.Lock(ctx, "octo/repo#1", "T-2"); err != nil || h != "T-2" {
		t.Fatalf("lock after release: %q %v", h, err)
	}
	if err := d.Unlock(ctx, "octo/repo#9", "T-2"); err != nil {
		t.Fatalf("releasing a free lock is fine: %v", err)
	}
	if _, err := d.Lock(ctx, "", "T"); err == nil {
		t.Fatal("empty key must be an error")
	}
}

func TestOneWinnerUnderContention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[string]bool{}
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// One Locks per contender: replicas share only the directory.
			d := New(dir, zerolog.Nop())
			holder := fmt.Sprintf("T-%d", i)
			h, err := d.Lock(context.Background(), "o/r#1", holder)
			if err != nil && !errors.Is(err, dispatch.ErrLocked) {
				t.Error(err)
				return
			}
			mu.Lock()
			winners[h] = true
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("every contender must see the same single holder, got %v", winners)
	}
}
