package nomad_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget/budgettest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// Two backends on one fake agent are two replicas: the contract's race
// goes through the real api client's check-and-set on the Variable.
func TestBudgetBookContract(t *testing.T) {
	t.Parallel()
	budgettest.Run(t, func(t *testing.T) (budget.Ledger, budget.Ledger) {
		e := newEnv(t, nomadtest.Options{})
		return budget.NewBookLedger(e.backend()), budget.NewBookLedger(e.backend())
	})
}
