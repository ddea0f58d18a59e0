package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Book is a backend's own check-and-set store of the ledger's entries, as
// one document: the docker and process backends keep it in a file changed
// under flock(2) beside their queue, Nomad in a Variable written with
// check-and-set, the memory backend in memory. BookLedger is the Ledger on
// any Book.
type Book interface {
	// UpdateBudget replaces the document by what change makes of it (nil:
	// leave it), atomically with respect to every other replica's update.
	UpdateBudget(ctx context.Context, change func(cur []byte) ([]byte, error)) error
	// ReadBudget returns the document as last written (nil when none).
	ReadBudget(ctx context.Context) ([]byte, error)
}

// The states of an entry.
const (
	stateReserved = "reserved"
	stateSettled  = "settled"
	stateReleased = "released"
)

// entry is one run in the book.
type entry struct {
	TaskID         string  `json:"task_id"`
	InstallationID int64   `json:"installation_id"`
	Repo           string  `json:"repo"`
	Month          string  `json:"month"`
	AmountUSD      float64 `json:"amount_usd"`
	Trimmed        bool    `json:"trimmed,omitempty"`
	CostUSD        float64 `json:"cost_usd,omitempty"`
	Known          bool    `json:"known,omitempty"`
	State          string  `json:"state"`
}

// counts is what the entry counts against its month's budgets.
func (e entry) counts() (spent, reserved float64, unknown bool) {
	switch e.State {
	case stateReserved:
		return 0, e.AmountUSD, false
	case stateSettled:
		return e.CostUSD, 0, !e.Known
	}
	return 0, 0, false
}

type bookDoc struct {
	Version int     `json:"version"`
	Entries []entry `json:"entries"`
}

// BookLedger is the Ledger over a Book.
type BookLedger struct {
	book Book
	// keepMonths is how many months of settled entries the book keeps
	// (reservations are kept until they settle).
	keepMonths int
}

// NewBookLedger is the ledger kept in b.
func NewBookLedger(b Book) *BookLedger { return &BookLedger{book: b, keepMonths: 2} }

var _ Ledger = (*BookLedger)(nil)

func decodeBook(b []byte) (bookDoc, error) {
	var d bookDoc
	if len(b) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("budget book does not decode: %w", err)
	}
	return d, nil
}

func (d bookDoc) find(taskID string) int {
	for i, e := range d.Entries {
		if e.TaskID == taskID {
			return i
		}
	}
	return -1
}

func (d bookDoc) totals(inst int64, repo, month string) (it, rt Totals) {
	repo = RepoKey(repo)
	for _, e := range d.Entries {
		if e.Month != month || e.InstallationID != inst {
			continue
		}
		s, r, u := e.counts()
		add := func(t *Totals) {
			t.SpentUSD += s
			t.ReservedUSD += r
			if u {
				t.Unknown++
			}
		}
		add(&it)
		if e.Repo == repo {
			add(&rt)
		}
	}
	return it, rt
}

// prune drops settled and released entries older than the months kept.
func (d *bookDoc) prune(month string, keep int) {
	t, err := time.Parse("2006-01", month)
	if err != nil {
		return
	}
	oldest := t.AddDate(0, -keep, 0).Format("2006-01")
	kept := d.Entries[:0]
	for _, e := range d.Entries {
		if e.State == stateReserved || e.Month >= oldest {
			kept = append(kept, e)
		}
	}
	d.Entries = kept
}

// Reserve implements Ledger.
func (l *BookLedger) Reserve(ctx context.Context, r Request) (Grant, error) {
	var g Grant
	err := l.book.UpdateBudget(ctx, func(cur []byte) ([]byte, error) {
		d, err := decodeBook(cur)
		if err != nil {
			return nil, err
		}
		if i := d.find(r.TaskID); i >= 0 && d.Entries[i].State != stateReleased {
			g = Grant{AmountUSD: d.Entries[i].AmountUSD, Trimmed: d.Entries[i].Trimmed, Existing: true}
			return nil, nil
		} else if i >= 0 {
			// Released (its start failed): it reserves afresh.
			d.Entries = append(d.Entries[:i], d.Entries[i+1:]...)
		}
		it, rt := d.totals(r.InstallationID, r.Repo, r.Month)
		if g, err = Decide(r, it, rt); err != nil {
			return nil, err
		}
		d.prune(r.Month, l.keepMonths)
		d.Version = 1
		d.Entries = append(d.Entries, entry{TaskID: r.TaskID, InstallationID: r.InstallationID, Repo: RepoKey(r.Repo),
			Month: r.Month, AmountUSD: g.AmountUSD, Trimmed: g.Trimmed, State: stateReserved})
		return json.Marshal(d)
	})
	return g, err
}

// Settle implements Ledger.
func (l *BookLedger) Settle(ctx context.Context, taskID string, costUSD float64, known bool) error {
	return l.change(ctx, taskID, func(e *entry) {
		e.State, e.Known, e.CostUSD = stateSettled, known, e.AmountUSD
		if known {
			e.CostUSD = costUSD
		}
	})
}

// Release implements Ledger.
func (l *BookLedger) Release(ctx context.Context, taskID string) error {
	return l.change(ctx, taskID, func(e *entry) { e.State = stateReleased })
}

// change applies set to the task's entry while it is reserved; any other
// entry (settled, released, none) is left as it is.
func (l *BookLedger) change(ctx context.Context, taskID string, set func(*entry)) error {
	return l.book.UpdateBudget(ctx, func(cur []byte) ([]byte, error) {
		d, err := decodeBook(cur)
		if err != nil {
			return nil, err
		}
		i := d.find(taskID)
		if i < 0 || d.Entries[i].State != stateReserved {
			return nil, nil
		}
		set(&d.Entries[i])
		return json.Marshal(d)
	})
}

// Totals implements Ledger.
func (l *BookLedger) Totals(ctx context.Context, inst int64, repo, month string) (Totals, Totals, error) {
	b, err := l.book.ReadBudget(ctx)
	if err != nil {
		return Totals{}, Totals{}, err
	}
	d, err := decodeBook(b)
	if err != nil {
		return Totals{}, Totals{}, err
	}
	it, rt := d.totals(inst, repo, month)
	return it, rt, nil
}

// MemoryBook is a Book in memory: the memory backend's, and one
// process's when nothing else is shared.
type MemoryBook struct {
	mu  sync.Mutex
	doc []byte
}

// UpdateBudget implements Book.
func (m *MemoryBook) UpdateBudget(_ context.Context, change func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := change(m.doc)
	if err != nil || next == nil {
		return err
	}
	m.doc = next
	return nil
}

// ReadBudget implements Book.
func (m *MemoryBook) ReadBudget(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doc, nil
}
