package nomad_test

import (
	"fmt"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// Two backends on one fake agent are two bot replicas: every write goes
// through the real api client's check-and-set.
func TestQueueContract(t *testing.T) {
	t.Parallel()
	backendtest.RunQueue(t, func(t *testing.T) (dispatch.Queue, dispatch.Queue) {
		e := newEnv(t, nomadtest.Options{})
		return e.backend(), e.backend()
	})
}

// A thousand queued runs fit in the one Variable the queue is.
func TestQueueOfAThousandFitsAVariable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	b := e.backend()
	err := b.UpdateQueue(t.Context(), func(q []dispatch.QueueEntry) ([]dispatch.QueueEntry, error) {
		for n := range 1000 {
			q = append(q, dispatch.QueueEntry{TaskID: fmt.Sprintf("T-%08X", n*7919), Repo: fmt.Sprintf("some-org/repository-%d", n%50),
				Number: 1000 + n, InstallationID: 40_000_000 + int64(n%5), EnqueuedAt: 1_732_450_000_000 + int64(n)*137})
		}
		return q, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v := e.fake.Var("default", nomad.QueuePath)
	if v == nil {
		t.Fatal("no queue variable")
	}
	if n := len(v.Items["entries"]); n > 48<<10 {
		t.Errorf("1,000 entries take %d bytes of the Variable's 64 KiB", n)
	} else {
		t.Logf("1,000 entries take %d bytes", n)
	}
	q, err := b.ReadQueue(t.Context())
	if err != nil || len(q) != 1000 {
		t.Fatalf("ReadQueue = %d entries, %v", len(q), err)
	}
}

// Two backends on one fake agent claim routine ticks through the real api
// client's check-and-set, under the deployed ACL policy.
func TestRoutineBooksContract(t *testing.T) {
	t.Parallel()
	backendtest.RunRoutineBooks(t, func(t *testing.T) (dispatch.RoutineBooks, dispatch.RoutineBooks) {
		e := newEnv(t, nomadtest.Options{})
		return e.backend(), e.backend()
	})
}
