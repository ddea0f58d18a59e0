package filequeue_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget/budgettest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filequeue"
)

// Two stores on one directory are two replicas on one machine: the race
// of the contract runs across them, through the flock.
func TestBudgetBookLedger(t *testing.T) {
	budgettest.Run(t, func(t *testing.T) (budget.Ledger, budget.Ledger) {
		dir := t.TempDir()
		return budget.NewBookLedger(filequeue.New(dir)), budget.NewBookLedger(filequeue.New(dir))
	})
}

// What a run's start and end pay for budgets in the file book, with a
// month of 2,000 runs kept (the book is rewritten whole on each change).
func BenchmarkBudgetBook(b *testing.B) {
	budgettest.BenchmarkAdmission(b, budget.NewBookLedger(filequeue.New(b.TempDir())), 2000)
}

// The floor: one change of the file queue, the same flock and rename.
func BenchmarkQueueFloor(b *testing.B) {
	s := filequeue.New(b.TempDir())
	for range b.N {
		if err := s.UpdateQueue(b.Context(), func(q []dispatch.QueueEntry) ([]dispatch.QueueEntry, error) {
			return []dispatch.QueueEntry{{TaskID: "T-1", Repo: "acme/web", Number: 1}}, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
