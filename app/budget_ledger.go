package app

import (
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// budgetLedger is where runs reserve their budgets, where every replica
// sees it: the shared database when SANDBOX_DATABASE_URL is set, else the
// backend's own check-and-set store beside its lock and queue (a file
// under flock for docker and process, a Nomad Variable, memory).
func budgetLedger(cfg *Config, backend dispatch.Backend, store receipts.Store) (budget.Ledger, error) {
	if cfg.DatabaseURL != "" {
		return receipts.LedgerOf(store)
	}
	if book, ok := backend.(budget.Book); ok {
		return budget.NewBookLedger(book), nil
	}
	if cfg.Settings.Budgets.Any() {
		return nil, fmt.Errorf("budgets: the %s backend keeps no budget book; set SANDBOX_DATABASE_URL to keep the budgets in the shared database", backend.Name())
	}
	return nil, nil
}
