// Package receipts keeps every receipt the bot sees end in an embedded
// SQLite database under SANDBOX_DATA_DIR, so the dashboard outlives the
// runs: the backend forgets a run once it is cleaned up, and GitHub holds
// the receipt only as comment text.
//
// SQLite is reached through modernc.org/sqlite (pure Go, no cgo) and
// database/sql. Every query the dashboard makes is served by an index on
// ended_at (alone or after repo, mode or status), so a page costs the same
// with ten or a hundred thousand receipts.
package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// FileName is the database file under the data directory.
const FileName = "receipts.db"

// Run is what the bot keeps of one run's receipt: the figures a person
// compares across runs, never the plan, summary or logs (those stay on
// GitHub, where their access rules apply).
type Run struct {
	TaskID string `json:"task_id"`
	Repo   string `json:"repo"`
	// RepoID is GitHub's id of the repository, which a rename or a
	// transfer keeps and a new repository of the old name does not get:
	// access is decided by it. 0 when it could not be read (such a
	// receipt shows on the operator's dashboard only).
	RepoID         int64 `json:"repo_id"`
	InstallationID int64 `json:"installation_id"`
	// Number is the issue or pull request the run belongs to.
	Number int `json:"number"`
	// Issue is the issue whose text was the task (a PR run's issue).
	Issue int `json:"issue"`
	// Title is the issue's or pull request's title when the run ended:
	// untrusted text, which every page escapes.
	Title   string `json:"title,omitempty"`
	Mode    string `json:"mode"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
	Branch  string `json:"branch,omitempty"`
	// URL is the issue or pull request on GitHub.
	URL             string    `json:"url"`
	CostUSD         float64   `json:"cost_usd"`
	DurationSeconds float64   `json:"duration_seconds"`
	InputTokens     int64     `json:"input_tokens"`
	OutputTokens    int64     `json:"output_tokens"`
	Steps           int       `json:"steps"`
	Error           string    `json:"error,omitempty"`
	EndedAt         time.Time `json:"ended_at"`
}

// Succeeded reports whether the run completed.
func (r Run) Succeeded() bool { return r.Status == StatusCompleted }

// StatusCompleted is the status of a run that did what it was asked.
const StatusCompleted = "completed"

// Store is the receipts database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	task_id         TEXT PRIMARY KEY,
	repo            TEXT NOT NULL,
	installation_id INTEGER NOT NULL,
	number          INTEGER NOT NULL,
	issue           INTEGER NOT NULL,
	mode            TEXT NOT NULL,
	status          TEXT NOT NULL,
	attempt         INTEGER NOT NULL,
	branch          TEXT NOT NULL,
	url             TEXT NOT NULL,
	cost_usd        REAL NOT NULL,
	duration_s      REAL NOT NULL,
	tokens_in       INTEGER NOT NULL,
	tokens_out      INTEGER NOT NULL,
	steps           INTEGER NOT NULL,
	error           TEXT NOT NULL,
	ended_at        INTEGER NOT NULL -- unix milliseconds
);
CREATE INDEX IF NOT EXISTS runs_ended ON runs(ended_at);
CREATE INDEX IF NOT EXISTS runs_repo_ended ON runs(repo, ended_at);
CREATE INDEX IF NOT EXISTS runs_mode_ended ON runs(mode, ended_at);
CREATE INDEX IF NOT EXISTS runs_status_ended ON runs(status, ended_at);
CREATE INDEX IF NOT EXISTS runs_cost ON runs(cost_usd);
`

// migrations bring a database of an older bot up to the schema; each is
// applied when the column it adds is missing. Receipts kept before the
// repository id was get 0, which no signed-in person's access matches.
var migrations = []struct{ column, sql string }{
	{"repo_id", `ALTER TABLE runs ADD COLUMN repo_id INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS runs_repo_id_ended ON runs(repo_id, ended_at);`},
	{"title", `ALTER TABLE runs ADD COLUMN title TEXT NOT NULL DEFAULT '';`},
}

// migrate applies the migrations a database lacks.
func migrate(db *sql.DB) error {
	rows, err := db.Query(`SELECT name FROM pragma_table_info('runs')`)
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
	for _, m := range migrations {
		if !have[m.column] {
			if _, err := db.Exec(m.sql); err != nil {
				return fmt.Errorf("add column %s: %w", m.column, err)
			}
		}
	}
	return nil
}

// Open opens (creating if needed) the database in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipts: create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// WAL lets the dashboard read while a follower writes; busy_timeout
	// makes a writer wait for another instead of failing at once.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("receipts: open %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipts: create schema in %s: %w", path, err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipts: migrate %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

const insertRun = `INSERT OR REPLACE INTO runs
	(task_id, repo, repo_id, installation_id, number, issue, mode, status, attempt, branch, url, cost_usd, duration_s, tokens_in, tokens_out, steps, error, ended_at, title)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Put stores a receipt, replacing an earlier one of the same task (a
// result posted again after a restart).
func (s *Store) Put(ctx context.Context, r Run) error { return s.PutMany(ctx, []Run{r}) }

// PutMany stores receipts in one transaction.
func (s *Store) PutMany(ctx context.Context, runs []Run) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("receipts: begin a write to %s: %w", s.path, err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, insertRun)
	if err != nil {
		return fmt.Errorf("receipts: prepare a write to %s: %w", s.path, err)
	}
	defer stmt.Close()
	for _, r := range runs {
		if r.TaskID == "" || r.Repo == "" {
			return errors.New("receipts: a receipt needs a task id and a repository")
		}
		if _, err := stmt.ExecContext(ctx, r.TaskID, r.Repo, r.RepoID, r.InstallationID, r.Number, r.Issue, r.Mode, r.Status, r.Attempt, r.Branch, r.URL,
			r.CostUSD, r.DurationSeconds, r.InputTokens, r.OutputTokens, r.Steps, r.Error, r.EndedAt.UnixMilli(), r.Title); err != nil {
			return fmt.Errorf("receipts: store %s of %s: %w", r.TaskID, r.Repo, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("receipts: commit to %s: %w", s.path, err)
	}
	return nil
}
