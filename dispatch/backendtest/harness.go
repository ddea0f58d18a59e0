package backendtest

import (
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Behavior is what the runner of a run does.
type Behavior string

// The runner behaviours the checks need.
const (
	// Hold: the runner starts, prints progress, and keeps running until
	// Harness.Release; then it writes a completed receipt and exits 0.
	// Cancelled (SIGTERM or the backend's equivalent), it writes an
	// interrupted receipt.
	Hold Behavior = "hold"
	// NoReceipt: the runner keeps running until Harness.Release, then ends
	// without writing result.json (killed, crashed).
	NoReceipt Behavior = "no-receipt"
)

// Behaviors remembers which behaviour each run of a harness has, for its
// runner and its Release. The zero value is ready to use.
type Behaviors struct {
	mu sync.Mutex
	n  int
	of map[string]Behavior
}

// Add numbers a new run (1, 2, ...), asks newID for its task id, and
// records be for it.
func (k *Behaviors) Add(be Behavior, newID func(n int) string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	id := newID(k.n)
	if k.of == nil {
		k.of = map[string]Behavior{}
	}
	k.of[id] = be
	return id
}

// Of returns the behaviour recorded for taskID.
func (k *Behaviors) Of(taskID string) Behavior {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.of[taskID]
}

// Harness is one backend under test and the hooks to drive its runner.
type Harness struct {
	Backend dispatch.Backend
	// Spec returns a run whose runner behaves as b, under a task id no
	// earlier call returned. It carries a token.
	Spec func(b Behavior) dispatch.RunSpec
	// Release lets the run of taskID go on to its end.
	Release func(taskID string)
	// Token returns the token the backend keeps for the run, where the
	// sandbox reads it (a file, a Variable), and false when it keeps none.
	Token func(taskID string) (string, bool)
	// Progress: the runner prints progress lines, and a Cancel is only
	// handled by the runner once it has printed the agent stage. Without
	// it, a running Status is enough.
	Progress bool
	// Timeout bounds each check (default 2 minutes).
	Timeout time.Duration
}
