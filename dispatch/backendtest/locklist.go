package backendtest

import (
	"context"
	"maps"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// ListingLocker is a Locker that lists its locks.
type ListingLocker interface {
	dispatch.Locker
	dispatch.LockLister
}

// LockLister checks that l lists exactly the locks it holds under a
// prefix, with their holders, keys lower-cased, released ones gone. The
// review batches of the bot are found again after a restart this way.
func LockLister(t *testing.T, l ListingLocker) {
	t.Helper()
	ctx := context.Background()
	for key, holder := range map[string]string{
		"batch/Octo/Hello#1": `{"task":"T-1"}`, "batch/octo/other#2": `{"task":"T-2"}`, "octo/hello#1": "T-3",
	} {
		if _, err := l.Lock(ctx, key, holder); err != nil {
			t.Fatalf("lock %s: %v", key, err)
		}
	}
	got, err := l.ListLocks(ctx, "batch/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"batch/octo/hello#1": `{"task":"T-1"}`, "batch/octo/other#2": `{"task":"T-2"}`}
	if !maps.Equal(got, want) {
		t.Fatalf("ListLocks(batch/) = %v, want %v", got, want)
	}
	if err := l.Unlock(ctx, "batch/octo/other#2", `{"task":"T-2"}`); err != nil {
		t.Fatal(err)
	}
	if got, err := l.ListLocks(ctx, "batch/"); err != nil || len(got) != 1 {
		t.Fatalf("after a release: %v %v, want one lock", got, err)
	}
	if got, err := l.ListLocks(ctx, "nothing/"); err != nil || len(got) != 0 {
		t.Fatalf("ListLocks of an unused prefix: %v %v, want none", got, err)
	}
}
