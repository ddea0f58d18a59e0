package budget_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget/budgettest"
)

func TestMemoryBookLedger(t *testing.T) {
	budgettest.Run(t, func(t *testing.T) (budget.Ledger, budget.Ledger) {
		l := budget.NewBookLedger(&budget.MemoryBook{})
		return l, l
	})
}
