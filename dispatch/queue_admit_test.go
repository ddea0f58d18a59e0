package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// listCounter counts how often the live runs are read.
type listCounter struct {
	*backendtest.Memory
	lists int
}

func (c *listCounter) List(ctx context.Context) ([]dispatch.RunStatus, error) {
	c.lists++
	return c.Memory.List(ctx)
}

// The bot admits at the end of every run; with nothing queued, that costs
// no listing of the runs (on the docker backend, two docker CLI calls).
// With a run waiting, the live runs are read and the run is admitted.
func TestAdmitLiveListsRunsOnlyForAQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &listCounter{Memory: backendtest.NewMemory()}
	caps := dispatch.Caps{Global: 1}
	now := time.Now()
	a, err := dispatch.AdmitLive(ctx, b, caps, now)
	got := a.Admitted
	if err != nil || len(got) != 0 || b.lists != 0 {
		t.Fatalf("empty queue: admitted %v, %v, %d listings, want none", got, err, b.lists)
	}
	if _, err := dispatch.Enqueue(ctx, b, dispatch.QueueEntry{TaskID: "T-00000001", Repo: "o/r", Number: 1, InstallationID: 1, EnqueuedAt: now.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	a, err = dispatch.AdmitLive(ctx, b, caps, now)
	got = a.Admitted
	if err != nil || len(got) != 1 || got[0].TaskID != "T-00000001" || b.lists != 1 {
		t.Fatalf("one waiting: admitted %v, %v, %d listings, want it, after one", got, err, b.lists)
	}
	// The admitted run is not live yet: admission runs again when its
	// claim's grace ends.
	if want := time.UnixMilli(now.UnixMilli()).Add(dispatch.ClaimGrace); !a.Recheck.Equal(want) {
		t.Errorf("Recheck = %v, want %v (the claim's grace)", a.Recheck, want)
	}
}
