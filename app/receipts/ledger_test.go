package receipts_test

import (
	"context"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget/budgettest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// ledgers opens the ledger of two stores on one database: two replicas.
func ledgers(t *testing.T, open func() (receipts.Store, error)) (budget.Ledger, budget.Ledger) {
	t.Helper()
	var out [2]budget.Ledger
	for i := range out {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if out[i], err = receipts.LedgerOf(s); err != nil {
			t.Fatal(err)
		}
	}
	return out[0], out[1]
}

func TestSQLiteLedger(t *testing.T) {
	t.Parallel()
	budgettest.Run(t, func(t *testing.T) (budget.Ledger, budget.Ledger) {
		dir := t.TempDir()
		return ledgers(t, func() (receipts.Store, error) { return receipts.OpenSQLite(dir) })
	})
}

// Two replicas on a real PostgreSQL server: the contract's race has them
// reserve at once.
func TestPostgresLedger(t *testing.T) {
	t.Parallel()
	testenv.Postgres(t)
	budgettest.Run(t, func(t *testing.T) (budget.Ledger, budget.Ledger) {
		url := testenv.Postgres(t)
		return ledgers(t, func() (receipts.Store, error) { return receipts.OpenPostgres(context.Background(), url) })
	})
}

// What a run's start and end pay for budgets, with a month of 2,000 runs
// kept: go test -run '^$' -bench BenchmarkLedger ./app/receipts
func BenchmarkLedgerSQLite(b *testing.B) {
	s, err := receipts.OpenSQLite(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, _ := receipts.LedgerOf(s)
	budgettest.BenchmarkAdmission(b, l, 2000)
}

func BenchmarkLedgerPostgres(b *testing.B) {
	s, err := receipts.OpenPostgres(context.Background(), testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, _ := receipts.LedgerOf(s)
	budgettest.BenchmarkAdmission(b, l, 2000)
}
