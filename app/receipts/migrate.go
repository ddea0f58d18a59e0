package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The schema is versioned: schema_migrations lists the versions applied,
// and a store opened on a database applies the ones it lacks, in order, in
// one transaction that holds a lock between processes (PostgreSQL: an
// advisory lock; SQLite: the write lock of BEGIN IMMEDIATE), so two
// replicas starting at once apply each version once and neither sees a
// half-made schema. A database at a version this code does not know (a
// newer bot wrote it) is refused rather than guessed at.

// migration is one version of the schema.
type migration struct {
	version int
	name    string
	apply   func(ctx context.Context, tx queryer) error
}

// queryer is what a migration runs its statements on (a transaction, or
// SQLite's connection inside BEGIN IMMEDIATE).
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// execAll runs statements in order.
func execAll(stmts ...string) func(context.Context, queryer) error {
	return func(ctx context.Context, tx queryer) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrate applies the migrations the database lacks.
func (s *database) migrate(ctx context.Context) error {
	return s.d.lock(ctx, s.db, func(tx queryer) error {
		if _, err := tx.ExecContext(ctx, migrationsTable); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		have, err := appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		latest := s.d.migrations[len(s.d.migrations)-1].version
		for v := range have {
			if v > latest {
				return fmt.Errorf("the database is at schema version %d, and this bot knows versions up to %d: run the newer bot, or a database of this one", v, latest)
			}
		}
		for _, m := range s.d.migrations {
			if have[m.version] {
				continue
			}
			if err := m.apply(ctx, tx); err != nil {
				return fmt.Errorf("version %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
				m.version, m.name, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("record version %d: %w", m.version, err)
			}
		}
		return nil
	})
}

func appliedVersions(ctx context.Context, tx queryer) (map[int]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	have := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		have[v] = true
	}
	return have, rows.Err()
}

// migrationLock is the PostgreSQL advisory lock key of the migrations
// (any constant; this one spells "sbot" in its low bytes).
const migrationLock = 0x73626f74

// migrations are the schema's versions, one text for both databases:
// SQLite takes BIGINT and DOUBLE PRECISION as its INTEGER and REAL.
func migrations(d string) []migration {
	lines := `CREATE TABLE transcript_lines (
	task_id TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	line    TEXT NOT NULL,
	PRIMARY KEY (task_id, seq)
)`
	if d == "sqlite" {
		// Lines clustered by run: a page reads one run's lines in one
		// range of the table.
		lines += " WITHOUT ROWID"
	}
	return []migration{
		// Version 1 is the receipts store as it was before versions: a
		// database of that bot keeps its table and gains what it lacks.
		{1, "receipts", func(ctx context.Context, tx queryer) error {
			if err := execAll(`CREATE TABLE IF NOT EXISTS runs (
	task_id         TEXT PRIMARY KEY,
	repo            TEXT NOT NULL,
	repo_id         BIGINT NOT NULL DEFAULT 0,
	installation_id BIGINT NOT NULL,
	number          BIGINT NOT NULL,
	issue           BIGINT NOT NULL,
	mode            TEXT NOT NULL,
	status          TEXT NOT NULL,
	attempt         BIGINT NOT NULL,
	branch          TEXT NOT NULL,
	url             TEXT NOT NULL,
	cost_usd        DOUBLE PRECISION NOT NULL,
	duration_s      DOUBLE PRECISION NOT NULL,
	tokens_in       BIGINT NOT NULL,
	tokens_out      BIGINT NOT NULL,
	steps           BIGINT NOT NULL,
	error           TEXT NOT NULL,
	ended_at        BIGINT NOT NULL, -- unix milliseconds
	title           TEXT NOT NULL DEFAULT ''
)`)(ctx, tx); err != nil {
				return err
			}
			if d == "sqlite" {
				if err := addMissingColumns(ctx, tx); err != nil {
					return err
				}
			}
			return execAll(runIndexes...)(ctx, tx)
		}},
		{2, "transcripts", execAll(`CREATE TABLE transcripts (
	task_id         TEXT PRIMARY KEY,
	repo            TEXT NOT NULL,
	repo_id         BIGINT NOT NULL,
	installation_id BIGINT NOT NULL,
	number          BIGINT NOT NULL,
	mode            TEXT NOT NULL,
	title           TEXT NOT NULL,
	started_at      BIGINT NOT NULL, -- unix milliseconds
	whole           INTEGER NOT NULL
)`, `CREATE INDEX transcripts_started ON transcripts(started_at)`, lines)},
		{3, "figures by day", execAll(dayTable, fillDays)},
		{4, "budget ledger", execAll(ledgerTable, `CREATE INDEX budget_entries_month ON budget_entries(installation_id, month)`)},
		// The usage page's columns: receipts kept before them are of
		// unknown cost when they named none (as the budgets count them),
		// and of no requester or model.
		{5, "usage", execAll(`ALTER TABLE runs ADD COLUMN cost_unknown INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE runs ADD COLUMN requester TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE runs ADD COLUMN model TEXT NOT NULL DEFAULT ''`,
			`UPDATE runs SET cost_unknown = 1 WHERE cost_usd <= 0`,
			usageIndexes[0], usageIndexes[1], limitsTable, usageDays, fillUsageDays)},
	}
}

// runIndexes serve every query the dashboard makes.
var runIndexes = []string{
	`CREATE INDEX IF NOT EXISTS runs_ended ON runs(ended_at)`,
	`CREATE INDEX IF NOT EXISTS runs_repo_ended ON runs(repo, ended_at)`,
	`CREATE INDEX IF NOT EXISTS runs_mode_ended ON runs(mode, ended_at)`,
	`CREATE INDEX IF NOT EXISTS runs_status_ended ON runs(status, ended_at)`,
	`CREATE INDEX IF NOT EXISTS runs_repo_id_ended ON runs(repo_id, ended_at)`,
	`CREATE INDEX IF NOT EXISTS runs_cost ON runs(cost_usd)`,
}

var postgresDialect = dialect{
	name: "postgres", numbered: true, migrations: migrations("postgres"),
	// An advisory lock of the two-key space, which the migrations' one
	// does not share.
	lockReceipts: `SELECT pg_advisory_xact_lock(1, 1)`,
	lock: func(ctx context.Context, db *sql.DB, migrate func(tx queryer) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// Held until the transaction ends: a second replica waits here,
		// then finds every version applied.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if err := migrate(tx); err != nil {
			return err
		}
		return tx.Commit()
	},
}

var sqliteDialect = dialect{
	name: "sqlite", migrations: migrations("sqlite"),
	// 0x10002: every table that may need it, not only those this
	// connection read; analysis_limit bounds the work to milliseconds.
	tune: []string{`PRAGMA optimize=0x10002`},
	lock: func(ctx context.Context, db *sql.DB, migrate func(tx queryer) error) error {
		// BEGIN IMMEDIATE takes the database's write lock at once (a
		// second process waits on busy_timeout), on one connection.
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			return fmt.Errorf("take the write lock: %w", err)
		}
		if err := migrate(conn); err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
			return err
		}
		_, err = conn.ExecContext(ctx, `COMMIT`)
		return err
	},
}

// addMissingColumns brings a runs table of an older bot to version 1:
// receipts kept before the repository id get 0, which no signed-in
// person's access matches.
func addMissingColumns(ctx context.Context, tx queryer) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info('runs')`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range []struct{ column, sql string }{
		{"repo_id", `ALTER TABLE runs ADD COLUMN repo_id INTEGER NOT NULL DEFAULT 0`},
		{"title", `ALTER TABLE runs ADD COLUMN title TEXT NOT NULL DEFAULT ''`},
	} {
		if !have[c.column] {
			if _, err := tx.ExecContext(ctx, c.sql); err != nil {
				return fmt.Errorf("add column %s: %w", c.column, err)
			}
		}
	}
	return nil
}
