// Package receipts keeps what people read of runs after the fact: every
// receipt the bot sees end (the dashboard's rows) and every run's
// transcript (its progress lines, which the run's page shows after the
// sandbox is gone). The backend forgets a run once it is cleaned up, and
// GitHub holds the receipt only as comment text.
//
// One Store, two databases behind database/sql: SQLite embedded under
// SANDBOX_DATA_DIR (modernc.org/sqlite, pure Go; the default for one
// machine), or PostgreSQL (github.com/jackc/pgx/v5) when replicas share
// the work (SANDBOX_DATABASE_URL). Both take the same versioned schema
// (migrate.go) and answer the same queries; receiptstest holds them to one
// contract. The dashboard's figures are read from a table that adds the
// receipts up by day as they are kept (days.go), and its page of runs
// from an index on ended_at, so a page costs about the same with ten or a
// hundred thousand receipts.
package receipts

import (
	"context"
	"errors"
	"time"
)

// FileName is the SQLite database file under its directory.
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
	// CostUnknown: nobody reported what the run cost (a command harness,
	// a model without a price, a run that left no result), so CostUSD is
	// 0 and means nothing. The usage page shows such runs as unknown and
	// counts them apart, never as $0.
	CostUnknown bool `json:"cost_unknown,omitempty"`
	// Requester is the GitHub login of the person whose label, command or
	// review asked for the run ("" when the bot started it on its own).
	Requester string `json:"requester,omitempty"`
	// Model is the model the run's configuration named ("" for the
	// harness's default).
	Model string `json:"model,omitempty"`
}

// Succeeded reports whether the run completed.
func (r Run) Succeeded() bool { return r.Status == StatusCompleted }

// StatusCompleted is the status of a run that did what it was asked.
const StatusCompleted = "completed"

// Store is the one store of receipts and transcripts, in SQLite or in
// PostgreSQL. It is safe for concurrent use, from several processes too
// (replicas on one PostgreSQL database, or on one SQLite file).
type Store interface {
	Receipts
	Transcripts
	Usage
	// Where names the database for errors and logs: a file, or host,
	// port and database name (never a password).
	Where() string
	Close() error
}

// Receipts are the ended runs' figures.
type Receipts interface {
	// Put keeps a receipt, replacing an earlier one of the same task (a
	// result posted again after a restart).
	Put(ctx context.Context, r Run) error
	// PutMany keeps receipts in one transaction, as Put does.
	PutMany(ctx context.Context, runs []Run) error
	// Import keeps the receipts the store does not hold yet and leaves
	// those it holds as they are (copying from another store); it returns
	// how many it added.
	Import(ctx context.Context, runs []Run) (int, error)
	// List returns the runs matching f, newest first, from offset.
	List(ctx context.Context, f Filter, offset, limit int) (Page, error)
	// Stats computes the figures of the runs f sees.
	Stats(ctx context.Context, f Filter) (Stats, error)
	// Repos lists the repositories with receipts that f's access allows,
	// ignoring f's other fields.
	Repos(ctx context.Context, f Filter) ([]string, error)
}

// Transcripts are the runs' progress lines, numbered by their place in
// the run's log (1, 2, ...: the numbering of the live page, so a browser's
// Last-Event-ID means the same line in both), each kept once.
type Transcripts interface {
	// Begin keeps a run's head when its follower starts; a head already
	// kept keeps its start, and its title unless h has one.
	Begin(ctx context.Context, h Head) error
	// Append keeps lines of a run; a line whose number is kept already is
	// left as it is (a restarted follower reads the log from its start
	// again), so it returns how many it added.
	Append(ctx context.Context, taskID string, lines []Line) (int, error)
	// Finish records that the run's log was read to its end: its
	// transcript is whole.
	Finish(ctx context.Context, taskID string) error
	// Head returns a run's head, ErrNoTranscript when none is kept.
	Head(ctx context.Context, taskID string) (Head, error)
	// Lines returns up to limit lines after the numbered one, in order.
	Lines(ctx context.Context, taskID string, after, limit int) ([]Line, error)
	// Heads lists the kept heads after the task id, in task id order (to
	// copy them).
	Heads(ctx context.Context, after string, limit int) ([]Head, error)
	// ImportHead keeps a head, as it is, when the store holds none of its
	// run (copying from another store).
	ImportHead(ctx context.Context, h Head) error
	// Prune removes the transcripts of runs that started before the time,
	// heads and lines; receipts stay. It is the store's hourly care: it
	// also refreshes the query planner's statistics where the database
	// does not do it by itself (SQLite).
	Prune(ctx context.Context, before time.Time) (Pruned, error)
}

// Head is what a transcript knows of its run: enough to show the run's
// page (and decide who may see it) when the backend has forgotten it and
// no receipt is kept yet.
type Head struct {
	TaskID         string `json:"task_id"`
	Repo           string `json:"repo"`
	RepoID         int64  `json:"repo_id"`
	InstallationID int64  `json:"installation_id"`
	Number         int    `json:"number"`
	Mode           string `json:"mode"`
	// Title is the issue's or pull request's title when the run started:
	// untrusted text, which every page escapes.
	Title string `json:"title,omitempty"`
	// StartedAt is when the head was first kept (retention counts from
	// it).
	StartedAt time.Time `json:"started_at"`
	// Lines is the highest line number kept.
	Lines int `json:"lines"`
	// Whole is true once the run's log was read to its end and kept.
	Whole bool `json:"whole"`
}

// Line is one progress line as the run's page shows it: JSON, cleaned of
// secrets and terminal escapes before it was kept.
type Line struct {
	Seq  int
	Data []byte
}

// Pruned is what a Prune removed.
type Pruned struct {
	Transcripts int
	Lines       int64
}

// ErrNoTranscript is a run whose transcript is not kept (never, or
// pruned).
var ErrNoTranscript = errors.New("no transcript kept for this run")

// Open opens the store: PostgreSQL at url when it is set, else SQLite in
// dir. Either way the schema is brought up to date first.
func Open(ctx context.Context, dir, url string) (Store, error) {
	if url != "" {
		return OpenPostgres(ctx, url)
	}
	return OpenSQLite(dir)
}
