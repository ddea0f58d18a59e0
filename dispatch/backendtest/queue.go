package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// RunQueue checks the run-queue contract on a store that newQueue makes
// fresh for each check, as two handles on one shared state (two bot
// replicas, or a bot before and after a restart).
func RunQueue(t *testing.T, newQueue func(t *testing.T) (dispatch.Queue, dispatch.Queue)) {
	for _, c := range queueChecks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b := newQueue(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c.run(t, ctx, a, b)
		})
	}
}

var queueChecks = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, a, b dispatch.Queue)
}{
	{"Order", testQueueOrder},
	{"Requests", testQueueRequests},
	{"AdmitUnderCaps", testQueueAdmitUnderCaps},
	{"Concurrent", testQueueConcurrent},
	{"Handover", testQueueHandover},
}

// testQueue runs the queue checks on a backend, the one handle playing
// both replicas.
func testQueue(t *testing.T, c *check) {
	for _, qc := range queueChecks {
		t.Run(qc.name, func(t *testing.T) {
			// The checks share the backend: each starts from an empty queue.
			if err := c.b.UpdateQueue(c.ctx, func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			qc.run(t, c.ctx, c.b, c.b)
		})
	}
}

func entry(n int, repo string, inst int64) dispatch.QueueEntry {
	return dispatch.QueueEntry{TaskID: fmt.Sprintf("T-%08X", n), Repo: repo, Number: n, InstallationID: inst, EnqueuedAt: int64(1000 + n)}
}

func ids(q []dispatch.QueueEntry) []string {
	out := make([]string, 0, len(q))
	for _, e := range q {
		out = append(out, e.TaskID)
	}
	return out
}

func mustEnqueue(t *testing.T, ctx context.Context, q dispatch.Queue, e dispatch.QueueEntry, place int) {
	t.Helper()
	got, err := dispatch.Enqueue(ctx, q, e)
	if err != nil || got != place {
		t.Fatalf("Enqueue(%s) = %d, %v; want place %d", e.TaskID, got, err, place)
	}
}

func testQueueOrder(t *testing.T, ctx context.Context, a, b dispatch.Queue) {
	if q, err := b.ReadQueue(ctx); err != nil || len(q) != 0 {
		t.Fatalf("ReadQueue of a new queue = %v, %v; want empty", q, err)
	}
	mustEnqueue(t, ctx, a, entry(1, "acme/web", 1), 1)
	mustEnqueue(t, ctx, b, entry(2, "acme/web", 1), 2)
	mustEnqueue(t, ctx, a, entry(3, "acme/api", 1), 3)
	// A redelivered trigger keeps its place and adds nothing.
	mustEnqueue(t, ctx, b, entry(1, "acme/web", 1), 1)
	q, err := b.ReadQueue(ctx)
	if err != nil || !slices.Equal(ids(q), []string{"T-00000001", "T-00000002", "T-00000003"}) {
		t.Fatalf("ReadQueue = %v, %v; want the three in order", ids(q), err)
	}
	if q[0] != entry(1, "acme/web", 1) {
		t.Errorf("entry read back as %+v, written as %+v", q[0], entry(1, "acme/web", 1))
	}
	if e, ok, err := dispatch.Dequeue(ctx, b, "T-00000002"); err != nil || !ok || e.TaskID != "T-00000002" {
		t.Fatalf("Dequeue = %+v, %v, %v", e, ok, err)
	}
	if _, ok, err := dispatch.Dequeue(ctx, a, "T-00000002"); err != nil || ok {
		t.Fatalf("Dequeue of a removed entry = %v, %v; want false, nil", ok, err)
	}
	q, _ = a.ReadQueue(ctx)
	if p := dispatch.Place(q, "T-00000003"); p != 2 {
		t.Errorf("place of the third after the second left = %d, want 2", p)
	}
}

func testQueueRequests(t *testing.T, ctx context.Context, a, b dispatch.Queue) {
	if _, err := b.LoadQueued(ctx, "T-0000000A"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("LoadQueued of nothing = %v, want ErrNotFound", err)
	}
	req := []byte(`{"mode":"plan","plan":"step 1"}`)
	if err := a.SaveQueued(ctx, "T-0000000A", req); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LoadQueued(ctx, "T-0000000A"); err != nil || string(got) != string(req) {
		t.Fatalf("LoadQueued = %q, %v; want %q", got, err, req)
	}
	if err := b.DropQueued(ctx, "T-0000000A"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadQueued(ctx, "T-0000000A"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("LoadQueued after DropQueued = %v, want ErrNotFound", err)
	}
	if err := a.DropQueued(ctx, "T-0000000A"); err != nil {
		t.Fatalf("DropQueued of nothing: %v", err)
	}
}

func testQueueAdmitUnderCaps(t *testing.T, ctx context.Context, a, b dispatch.Queue) {
	now := time.Unix(1_700_000_000, 0)
	for n := 1; n <= 5; n++ {
		mustEnqueue(t, ctx, a, entry(n, "acme/web", 1), n)
	}
	caps := dispatch.Caps{Global: 2}
	admit := func(q dispatch.Queue, caps dispatch.Caps, live []dispatch.Meta, at time.Time, want ...string) {
		t.Helper()
		got, err := dispatch.Admit(ctx, q, caps, live, at)
		if err != nil || !slices.Equal(ids(got.Admitted), want) {
			t.Fatalf("Admit = %v, %v; want %v", ids(got.Admitted), err, want)
		}
	}
	admit(a, caps, nil, now, "T-00000001", "T-00000002")
	// The slots are taken until the runs end, whoever asks.
	admit(b, caps, nil, now, []string{}...)
	q, _ := b.ReadQueue(ctx)
	if p := dispatch.Place(q, "T-00000003"); p != 1 {
		t.Errorf("place of the third once two run = %d, want 1", p)
	}
	// A run live on the backend without a queue entry holds a slot too.
	if _, _, err := dispatch.Dequeue(ctx, a, "T-00000001"); err != nil {
		t.Fatal(err)
	}
	admit(b, caps, []dispatch.Meta{{TaskID: "T-000000FF", Repo: "acme/other", InstallationID: 9}}, now, []string{}...)
	admit(b, caps, nil, now, "T-00000003")
	// A claim whose run never showed on the backend waits again after the
	// grace, at its place, and is admitted again before later ones.
	later := now.Add(dispatch.ClaimGrace + time.Second)
	live := []dispatch.Meta{{TaskID: "T-00000002", Repo: "acme/web", InstallationID: 1}}
	admit(a, caps, live, later, "T-00000003")
	// Per repository and per installation: entries held by their cap are
	// passed over for later ones that fit.
	for _, id := range []string{"T-00000002", "T-00000003", "T-00000004", "T-00000005"} {
		if _, _, err := dispatch.Dequeue(ctx, a, id); err != nil {
			t.Fatal(err)
		}
	}
	mustEnqueue(t, ctx, a, entry(11, "acme/web", 1), 1)
	mustEnqueue(t, ctx, a, entry(12, "ACME/Web", 1), 2)
	mustEnqueue(t, ctx, a, entry(13, "acme/api", 1), 3)
	mustEnqueue(t, ctx, a, entry(14, "acme/ops", 1), 4)
	mustEnqueue(t, ctx, a, entry(15, "other/x", 2), 5)
	admit(b, dispatch.Caps{PerRepo: 1, PerInstallation: 2}, nil, now, "T-0000000B", "T-0000000D", "T-0000000F")
}

func testQueueConcurrent(t *testing.T, ctx context.Context, a, b dispatch.Queue) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	// each runs f n times at once, on both handles in turn.
	each := func(f func(i int, q dispatch.Queue) error) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := a
				if i%2 == 1 {
					q = b
				}
				if err := f(i, q); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
	}
	each(func(i int, q dispatch.Queue) error {
		_, err := dispatch.Enqueue(ctx, q, entry(100+i, "acme/web", 1))
		return err
	})
	q, err := a.ReadQueue(ctx)
	if err != nil || len(q) != n {
		t.Fatalf("after %d concurrent Enqueues the queue holds %d entries (%v)", n, len(q), err)
	}
	// Replicas admitting at once never claim more than the cap, nor one
	// entry twice.
	var mu sync.Mutex
	var admitted []string
	each(func(_ int, q dispatch.Queue) error {
		got, err := dispatch.Admit(ctx, q, dispatch.Caps{Global: 3}, nil, time.Now())
		mu.Lock()
		defer mu.Unlock()
		admitted = append(admitted, ids(got.Admitted)...)
		return err
	})
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slices.Sort(admitted)
	if len(admitted) != 3 || len(slices.Compact(slices.Clone(admitted))) != 3 {
		t.Fatalf("concurrent Admit with a cap of 3 admitted %v", admitted)
	}
}

// testQueueHandover: a claim and the request beside it outlive the bot
// that made them (b is the bot after a restart, or another replica); the
// claim holds its slot for its grace, says when that ends (Recheck), and
// is then admitted again before every entry behind it, the cap held.
func testQueueHandover(t *testing.T, ctx context.Context, a, b dispatch.Queue) {
	now := time.UnixMilli(1_700_000_000_000)
	for n := 1; n <= 3; n++ {
		mustEnqueue(t, ctx, a, entry(n, "acme/web", 1), n)
		if err := a.SaveQueued(ctx, entry(n, "", 0).TaskID, []byte(fmt.Sprintf(`{"n":%d}`, n))); err != nil {
			t.Fatal(err)
		}
	}
	caps := dispatch.Caps{Global: 1}
	admitAt := func(q dispatch.Queue, live []dispatch.Meta, at time.Time, want []string, recheck time.Time) {
		t.Helper()
		got, err := dispatch.Admit(ctx, q, caps, live, at)
		if err != nil || !slices.Equal(ids(got.Admitted), want) || !got.Recheck.Equal(recheck) {
			t.Fatalf("Admit(%v) = %v, recheck %v, %v; want %v, recheck %v", at, ids(got.Admitted), got.Recheck, err, want, recheck)
		}
	}
	first := entry(1, "", 0).TaskID
	grace := now.Add(dispatch.ClaimGrace)
	admitAt(a, nil, now, []string{first}, grace)
	// The other handle sees the claim, its time and its request.
	q, err := b.ReadQueue(ctx)
	if err != nil || len(q) != 3 || q[0].Waiting() || q[0].ClaimedAt != now.UnixMilli() || !q[1].Waiting() {
		t.Fatalf("queue read back after a claim = %+v, %v", q, err)
	}
	if got, err := b.LoadQueued(ctx, first); err != nil || string(got) != `{"n":1}` {
		t.Fatalf("the claimed run's request read back as %q, %v", got, err)
	}
	// Within its grace the claim holds the only slot; admission says
	// when to look again.
	admitAt(b, nil, now.Add(time.Second), []string{}, grace)
	// Once its run is live, nothing is left to look at again.
	admitAt(b, []dispatch.Meta{{TaskID: first, Repo: "acme/web", InstallationID: 1}}, now.Add(time.Second), []string{}, time.Time{})
	// At the end of its grace, with no run, it gets its slot back: first.
	admitAt(b, nil, grace, []string{first}, grace.Add(dispatch.ClaimGrace))
	q, _ = a.ReadQueue(ctx)
	if p := dispatch.Place(q, entry(2, "", 0).TaskID); p != 1 {
		t.Errorf("the second entry's place after the first was admitted again = %d, want 1", p)
	}
}
