package filequeue_test

import (
	"testing"

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
