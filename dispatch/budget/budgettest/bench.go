package budgettest

import (
	"context"
	"fmt"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// BenchmarkAdmission measures what budgets add to a run's start and end:
// one Reserve (before submission) and one Settle (when the result is
// read), on a ledger that already holds a month of runs (seed).
func BenchmarkAdmission(b *testing.B, l budget.Ledger, seed int) {
	ctx := context.Background()
	r := budget.Request{InstallationID: 7, Repo: "acme/web", Month: "2026-11", AmountUSD: 0.01, InstallationUSD: 1e9, FloorUSD: 0.01}
	for i := range seed {
		r.TaskID = fmt.Sprintf("S-%08d", i)
		if _, err := l.Reserve(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := l.Settle(ctx, r.TaskID, 0.01, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		r.TaskID = fmt.Sprintf("B-%08d", i)
		if _, err := l.Reserve(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := l.Settle(ctx, r.TaskID, 0.01, true); err != nil {
			b.Fatal(err)
		}
	}
}
