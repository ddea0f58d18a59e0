package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// The budget ledger in the shared database: one row per run that
// reserved. A reservation reads the month's figures and inserts its row in
// one transaction that holds a lock no other replica's reservation for the
// installation gets past (PostgreSQL: a transaction-scoped advisory lock
// keyed by the installation; SQLite: the database's write lock, which its
// transactions take at BEGIN), so the check and the set are one step.
// Settling and releasing are one conditional UPDATE each: only a reserved
// row changes, so a second settle changes nothing.
const ledgerTable = `CREATE TABLE budget_entries (
	task_id         TEXT PRIMARY KEY,
	installation_id BIGINT NOT NULL,
	repo            TEXT NOT NULL, -- lower case
	month           TEXT NOT NULL, -- 2026-11, in the budgets' time zone
	amount_usd      DOUBLE PRECISION NOT NULL,
	trimmed         INTEGER NOT NULL,
	cost_usd        DOUBLE PRECISION NOT NULL,
	known           INTEGER NOT NULL,
	state           TEXT NOT NULL, -- reserved, settled, released
	updated_at      BIGINT NOT NULL -- unix milliseconds
)`

// ledgerLock is the first key of the budget's advisory locks (the two-key
// space: the receipts' lock is (1, 1)).
const ledgerLock = 3

// sqlLedger is the budget.Ledger on the store's database.
type sqlLedger struct{ s *database }

var _ budget.Ledger = (*sqlLedger)(nil)

// LedgerOf is the budget ledger kept in the store's database.
func LedgerOf(s Store) (budget.Ledger, error) {
	ss, ok := s.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("receipts: the store %s keeps no budget ledger", s.Where())
	}
	return &sqlLedger{s: ss.database}, nil
}

// Reserve implements budget.Ledger.
func (l *sqlLedger) Reserve(ctx context.Context, r budget.Request) (budget.Grant, error) {
	tx, err := l.s.db.BeginTx(ctx, nil)
	if err != nil {
		return budget.Grant{}, fmt.Errorf("budget: begin in %s: %w", l.s.where, err)
	}
	defer tx.Rollback()
	if l.s.d.numbered {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, ledgerLock, int32(r.InstallationID%(1<<31))); err != nil {
			return budget.Grant{}, fmt.Errorf("budget: lock installation %d in %s: %w", r.InstallationID, l.s.where, err)
		}
	}
	if g, ok, err := l.existing(ctx, tx, r.TaskID); err != nil || ok {
		return g, err
	}
	it, rt, err := l.totals(ctx, tx, r.InstallationID, r.Repo, r.Month)
	if err != nil {
		return budget.Grant{}, err
	}
	g, err := budget.Decide(r, it, rt)
	if err != nil {
		return g, err
	}
	if _, err := tx.ExecContext(ctx, l.s.q(`INSERT INTO budget_entries (task_id, installation_id, repo, month, amount_usd, trimmed, cost_usd, known, state, updated_at)
VALUES (?, ?, ?, ?, ?, ?, 0, 0, 'reserved', ?)`), r.TaskID, r.InstallationID, budget.RepoKey(r.Repo), r.Month, g.AmountUSD, boolInt(g.Trimmed), time.Now().UnixMilli()); err != nil {
		return budget.Grant{}, fmt.Errorf("budget: reserve %s in %s: %w", r.TaskID, l.s.where, err)
	}
	if err := tx.Commit(); err != nil {
		return budget.Grant{}, fmt.Errorf("budget: reserve %s in %s: %w", r.TaskID, l.s.where, err)
	}
	return g, nil
}

// existing is the grant taskID holds already (a redelivered event); a
// released one (its start failed) is deleted, to reserve afresh.
func (l *sqlLedger) existing(ctx context.Context, tx *sql.Tx, taskID string) (budget.Grant, bool, error) {
	var amount float64
	var trimmed int
	var state string
	err := tx.QueryRowContext(ctx, l.s.q(`SELECT amount_usd, trimmed, state FROM budget_entries WHERE task_id = ?`), taskID).Scan(&amount, &trimmed, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return budget.Grant{}, false, nil
	case err != nil:
		return budget.Grant{}, false, fmt.Errorf("budget: read %s in %s: %w", taskID, l.s.where, err)
	case state == "released":
		if _, err := tx.ExecContext(ctx, l.s.q(`DELETE FROM budget_entries WHERE task_id = ?`), taskID); err != nil {
			return budget.Grant{}, false, fmt.Errorf("budget: reserve %s again in %s: %w", taskID, l.s.where, err)
		}
		return budget.Grant{}, false, nil
	}
	return budget.Grant{AmountUSD: amount, Trimmed: trimmed == 1, Existing: true}, true, nil
}

// Settle implements budget.Ledger.
func (l *sqlLedger) Settle(ctx context.Context, taskID string, costUSD float64, known bool) error {
	_, err := l.s.db.ExecContext(ctx, l.s.q(`UPDATE budget_entries SET state = 'settled', known = ?,
cost_usd = CASE WHEN ? = 1 THEN ? ELSE amount_usd END, updated_at = ? WHERE task_id = ? AND state = 'reserved'`),
		boolInt(known), boolInt(known), costUSD, time.Now().UnixMilli(), taskID)
	if err != nil {
		return fmt.Errorf("budget: settle %s in %s: %w", taskID, l.s.where, err)
	}
	return nil
}

// Release implements budget.Ledger.
func (l *sqlLedger) Release(ctx context.Context, taskID string) error {
	_, err := l.s.db.ExecContext(ctx, l.s.q(`UPDATE budget_entries SET state = 'released', updated_at = ? WHERE task_id = ? AND state = 'reserved'`),
		time.Now().UnixMilli(), taskID)
	if err != nil {
		return fmt.Errorf("budget: release %s in %s: %w", taskID, l.s.where, err)
	}
	return nil
}

// Totals implements budget.Ledger.
func (l *sqlLedger) Totals(ctx context.Context, inst int64, repo, month string) (budget.Totals, budget.Totals, error) {
	return l.totals(ctx, l.s.db, inst, repo, month)
}

type rowQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// totals adds up the month's rows of the installation, and of repo.
func (l *sqlLedger) totals(ctx context.Context, q rowQueryer, inst int64, repo, month string) (it, rt budget.Totals, err error) {
	rows, err := q.QueryContext(ctx, l.s.q(`SELECT repo,
	COALESCE(SUM(CASE WHEN state = 'settled' THEN cost_usd ELSE 0 END), 0),
	COALESCE(SUM(CASE WHEN state = 'reserved' THEN amount_usd ELSE 0 END), 0),
	COALESCE(SUM(CASE WHEN state = 'settled' AND known = 0 THEN 1 ELSE 0 END), 0)
FROM budget_entries WHERE installation_id = ? AND month = ? GROUP BY repo`), inst, month)
	if err != nil {
		return it, rt, fmt.Errorf("budget: read the month's figures in %s: %w", l.s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t budget.Totals
		if err := rows.Scan(&name, &t.SpentUSD, &t.ReservedUSD, &t.Unknown); err != nil {
			return it, rt, fmt.Errorf("budget: read the month's figures in %s: %w", l.s.where, err)
		}
		it.SpentUSD += t.SpentUSD
		it.ReservedUSD += t.ReservedUSD
		it.Unknown += t.Unknown
		if name == budget.RepoKey(repo) {
			rt = t
		}
	}
	return it, rt, rows.Err()
}
