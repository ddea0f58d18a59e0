package filelock

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestLockUnlock(t *testing.T) {
	d := Dir(t.TempDir())
	if h, err := d.Lock("Octo/Repo#1", "T-1"); err != nil || h != "T-1" {
		t.Fatalf("first lock: %q %v", h, err)
	}
	if h, err := d.Lock("octo/repo#1", "T-1"); err != nil || h != "T-1" {
		t.Fatalf("re-lock by the holder (names are case-insensitive): %q %v", h, err)
	}
	if h, err := d.Lock("octo/repo#1", "T-2"); !errors.Is(err, dispatch.ErrLocked) || h != "T-1" {
		t.Fatalf("contended lock: %q %v", h, err)
	}
	if other, err := d.Unlock("octo/repo#1", "T-2"); err != nil || other != "T-1" {
		t.Fatalf("unlock by a non-holder must leave the lock: %q %v", other, err)
	}
	if _, err := d.Unlock("octo/repo#1", "T-1"); err != nil {
		t.Fatal(err)
	}
	if h, err := d.Lock("octo/repo#1", "T-2"); err != nil || h != "T-2" {
		t.Fatalf("lock after release: %q %v", h, err)
	}
	if _, err := d.Unlock("octo/repo#9", "T-2"); err != nil {
		t.Fatalf("releasing a free lock is fine: %v", err)
	}
	if _, err := d.Lock("", "T"); err == nil {
		t.Fatal("empty key must be an error")
	}
}

func TestOneWinnerUnderContention(t *testing.T) {
	d := Dir(t.TempDir())
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[string]bool{}
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			holder := fmt.Sprintf("T-%d", i)
			h, err := d.Lock("o/r#1", holder)
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
