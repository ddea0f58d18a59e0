package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrQueueUnchanged is what a change passed to Queue.UpdateQueue returns
// when it has nothing to write: the store then writes nothing and
// UpdateQueue returns nil.
var ErrQueueUnchanged = errors.New("queue unchanged")

// QueueEntry is one run in the queue: waiting for a slot (ClaimedAt zero),
// or holding one it claimed until its run ends. Entries are small on
// purpose (the whole queue is one record on Nomad, whose Variables hold at
// most 64 KiB); what the bot needs to start the run is kept beside it
// (SaveQueued).
type QueueEntry struct {
	TaskID         string `json:"id"`
	Repo           string `json:"repo"`
	Number         int    `json:"n"`
	InstallationID int64  `json:"inst"`
	// EnqueuedAt and ClaimedAt are Unix milliseconds.
	EnqueuedAt int64 `json:"at"`
	ClaimedAt  int64 `json:"claimed,omitempty"`
}

// Waiting reports whether the entry still waits for a slot.
func (e QueueEntry) Waiting() bool { return e.ClaimedAt == 0 }

// Queue is the run queue shared by every bot replica on a backend: the
// order runs wait in and the slots queued runs took, kept in the backend so
// a restarted bot and a second replica see the same queue. Implementations:
// dispatch/filequeue (docker, process), Nomad Variables with check-and-set
// (dispatch/nomad), memory.
type Queue interface {
	// UpdateQueue replaces the queue by what change makes of it,
	// atomically: if another writer changed the queue between the read and
	// the write, it reads again and calls change again, so change must
	// have no effect besides its result. A change returning
	// ErrQueueUnchanged writes nothing; any other error is returned.
	UpdateQueue(ctx context.Context, change func(q []QueueEntry) ([]QueueEntry, error)) error
	// ReadQueue returns the queue as last written, oldest first.
	ReadQueue(ctx context.Context) ([]QueueEntry, error)
	// SaveQueued keeps what the bot needs to start the queued run taskID
	// later (never a token); LoadQueued returns it, or ErrNotFound;
	// DropQueued deletes it, and is no error when there is nothing.
	SaveQueued(ctx context.Context, taskID string, request []byte) error
	LoadQueued(ctx context.Context, taskID string) ([]byte, error)
	DropQueued(ctx context.Context, taskID string) error
}

// Caps bound how many runs go at once: in all, per installation and per
// repository. 0 is no cap.
type Caps struct {
	// Global caps concurrent runs in all, PerInstallation per
	// installation, PerRepo per repository; 0 is no cap. A run over one
	// waits in the queue.
	Global          int `yaml:"global"`
	PerInstallation int `yaml:"per_installation"`
	PerRepo         int `yaml:"per_repo"`
}

// Any reports whether any cap is set, i.e. whether runs queue at all.
func (c Caps) Any() bool { return c.Global > 0 || c.PerInstallation > 0 || c.PerRepo > 0 }

// Fits reports whether one more run fits under the caps (0 or less is no
// cap) while total runs hold a slot, inInstallation of them in its
// installation and inRepo in its repository.
func (c Caps) Fits(total, inInstallation, inRepo int) bool {
	return (c.Global <= 0 || total < c.Global) && (c.PerInstallation <= 0 || inInstallation < c.PerInstallation) &&
		(c.PerRepo <= 0 || inRepo < c.PerRepo)
}

// ClaimGrace is how long a claimed slot counts without its run showing on
// the backend: the time the bot takes to submit it. A claim older than
// that whose run is not live was left by a replica that stopped before
// submitting, and its entry waits again; the next admission gives it its
// slot back first (it is older than the entries behind it), and the bot
// re-runs admission when the oldest such claim's grace ends
// (Admission.Recheck), so a stranded claim never waits for a run to end.
// A restarted bot does not wait for it: it resumes every claimed run that
// has no sandbox at once (Unsubmitted), as submission is idempotent by
// task id.
const ClaimGrace = 2 * time.Minute

// Enqueue adds e at the end of the queue unless its task is there already,
// and returns its place among the waiting entries (1 is next).
func Enqueue(ctx context.Context, q Queue, e QueueEntry) (place int, err error) {
	err = q.UpdateQueue(ctx, func(cur []QueueEntry) ([]QueueEntry, error) {
		next, added := appendNew(cur, e)
		place = Place(next, e.TaskID)
		if !added {
			return nil, ErrQueueUnchanged
		}
		return next, nil
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue %s: %w", e.TaskID, err)
	}
	return place, nil
}

// appendNew appends e unless its task is in q already.
func appendNew(q []QueueEntry, e QueueEntry) ([]QueueEntry, bool) {
	for _, c := range q {
		if c.TaskID == e.TaskID {
			return q, false
		}
	}
	return append(q, e), true
}

// Place is the 1-based place of taskID among the waiting entries, or 0
// when it is not waiting.
func Place(q []QueueEntry, taskID string) int {
	n := 0
	for _, e := range q {
		if !e.Waiting() {
			continue
		}
		n++
		if e.TaskID == taskID {
			return n
		}
	}
	return 0
}

// Dequeue removes taskID's entry, waiting or claimed, and returns it.
func Dequeue(ctx context.Context, q Queue, taskID string) (QueueEntry, bool, error) {
	var removed QueueEntry
	found := false
	err := q.UpdateQueue(ctx, func(cur []QueueEntry) ([]QueueEntry, error) {
		found = false
		for i, e := range cur {
			if e.TaskID == taskID {
				removed, found = e, true
				return append(cur[:i:i], cur[i+1:]...), nil
			}
		}
		return nil, ErrQueueUnchanged
	})
	if err != nil {
		return QueueEntry{}, false, fmt.Errorf("remove %s from the queue: %w", taskID, err)
	}
	return removed, found, nil
}

// DequeueWaiting removes taskID's entry only while it waits for a slot:
// removed=false when it is not in the queue or already holds a slot.
func DequeueWaiting(ctx context.Context, q Queue, taskID string) (removed bool, err error) {
	err = q.UpdateQueue(ctx, func(cur []QueueEntry) ([]QueueEntry, error) {
		removed = false
		for i, e := range cur {
			if e.TaskID == taskID && e.Waiting() {
				removed = true
				return append(cur[:i:i], cur[i+1:]...), nil
			}
		}
		return nil, ErrQueueUnchanged
	})
	if err != nil {
		return false, fmt.Errorf("remove waiting %s from the queue: %w", taskID, err)
	}
	return removed, nil
}

// Admission is what one admission decided.
type Admission struct {
	// Admitted are the entries that took a slot: the caller starts them.
	Admitted []QueueEntry
	// Recheck is when the oldest claim whose run is not live (the ones
	// admitted here included) ends its grace: admission must run again
	// then, or a claim whose starter stopped holds its slot until some run
	// ends. Zero when every claim's run is live.
	Recheck time.Time
}

// Admit claims, oldest first, every waiting entry that fits under every
// cap, and returns them (the caller starts them) with when admission
// must run again (Admission.Recheck). live are the runs the
// backend says have not ended (the backend's state is what replicas
// agree on); claimed entries count too while their run is live or their
// claim is younger than ClaimGrace, so a run claimed by another replica
// and not yet submitted holds its slot. Older claims whose run is not live
// wait again, at their place, so a run a stopped replica claimed is not
// lost (the caller skips one that already ran). An entry that does not
// fit is passed over for later ones only when a per-installation or
// per-repository cap holds it: the global cap stops the line.
func Admit(ctx context.Context, q Queue, caps Caps, live []Meta, now time.Time) (Admission, error) {
	var a Admission
	err := q.UpdateQueue(ctx, func(cur []QueueEntry) ([]QueueEntry, error) {
		next, got, changed := admit(cur, caps, live, now)
		a = Admission{Admitted: got, Recheck: recheckAt(next, live)}
		if !changed {
			return nil, ErrQueueUnchanged
		}
		return next, nil
	})
	if err != nil {
		return Admission{}, fmt.Errorf("admit queued runs: %w", err)
	}
	return a, nil
}

// recheckAt is when the oldest claim in q whose run is not live ends its
// grace, or zero.
func recheckAt(q []QueueEntry, live []Meta) time.Time {
	var oldest int64
	for _, e := range q {
		if e.Waiting() || slices.ContainsFunc(live, func(m Meta) bool { return m.TaskID == e.TaskID }) {
			continue
		}
		if oldest == 0 || e.ClaimedAt < oldest {
			oldest = e.ClaimedAt
		}
	}
	if oldest == 0 {
		return time.Time{}
	}
	return time.UnixMilli(oldest).Add(ClaimGrace)
}

// admit is Admit's decision on one reading of the queue.
func admit(cur []QueueEntry, caps Caps, live []Meta, now time.Time) (next, admitted []QueueEntry, changed bool) {
	type slot struct {
		inst int64
		repo string
	}
	held := map[string]slot{}
	for _, m := range live {
		held[m.TaskID] = slot{m.InstallationID, strings.ToLower(m.Repo)}
	}
	next = make([]QueueEntry, len(cur))
	copy(next, cur)
	nowMs := now.UnixMilli()
	for i, e := range next {
		if e.Waiting() {
			continue
		}
		if _, ok := held[e.TaskID]; ok || nowMs-e.ClaimedAt < ClaimGrace.Milliseconds() {
			held[e.TaskID] = slot{e.InstallationID, strings.ToLower(e.Repo)}
			continue
		}
		next[i].ClaimedAt, changed = 0, true // stale claim: wait again
	}
	perInst, perRepo := map[int64]int{}, map[string]int{}
	for _, s := range held {
		perInst[s.inst]++
		perRepo[s.repo]++
	}
	total := len(held)
	for i, e := range next {
		if !e.Waiting() {
			continue
		}
		if caps.Global > 0 && total >= caps.Global {
			break
		}
		repo := strings.ToLower(e.Repo)
		if !caps.Fits(total, perInst[e.InstallationID], perRepo[repo]) {
			continue
		}
		next[i].ClaimedAt, changed = nowMs, true
		admitted = append(admitted, next[i])
		total++
		perInst[e.InstallationID]++
		perRepo[repo]++
	}
	return next, admitted, changed
}
