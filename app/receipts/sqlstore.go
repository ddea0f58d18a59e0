package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"modernc.org/sqlite"               // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// sqlStore is the Store on database/sql, put together from one part per
// interface the Store is made of, each on the one database: it adds
// nothing of its own. The queries are written once, with ? placeholders
// and the SQL both databases speak (ON CONFLICT, CASE sums); the dialect
// rewrites the placeholders for PostgreSQL and holds the schema each
// database is given (migrate.go).
type sqlStore struct {
	*database       // Where, Close; the schema's migrations (migrate.go)
	*receiptRows    // Receipts: the runs table, its pages and figures
	*transcriptRows // Transcripts (transcript.go)
	*usageRows      // Usage: the usage page's figures and the budget limits (usage.go)
}

var _ Store = (*sqlStore)(nil)

// newSQLStore puts the store's parts together on db.
func newSQLStore(db *sql.DB, d dialect, where string) *sqlStore {
	base := &database{db: db, d: d, where: where}
	return &sqlStore{
		database:       base,
		receiptRows:    &receiptRows{database: base, days: &dayRollups{database: base}},
		transcriptRows: &transcriptRows{database: base},
		usageRows:      &usageRows{database: base},
	}
}

// database is the connection the parts share, with its dialect: it
// writes a query in the dialect's placeholders (q), brings the schema up
// to date (migrate) and keeps the planner's statistics (tune).
type database struct {
	db    *sql.DB
	d     dialect
	where string
}

// receiptRows are the Receipts: the runs table, kept with the day tables'
// figures (days.go), read a page (query.go) or a dashboard's figures
// (stats.go) at a time.
type receiptRows struct {
	*database
	days *dayRollups
}

// dialect is what differs between the two databases.
type dialect struct {
	name string
	// numbered placeholders ($1, $2, ...) instead of ?
	numbered bool
	// migrations bring a database to the current schema, in order.
	migrations []migration
	// lock serialises migrations between processes starting at once, and
	// runs them in one transaction.
	lock func(ctx context.Context, db *sql.DB, migrate func(tx queryer) error) error
	// lockReceipts, when set, serialises the writes of receipts between
	// processes until the transaction ends, so a replaced receipt's
	// figures are read as they are (a receipt is written once a run, so
	// one lock costs nothing; SQLite's transactions take the database's
	// write lock at BEGIN instead).
	lockReceipts string
	// tune keeps the query planner's statistics current (SQLite's planner
	// has none until asked, and then picks the wrong index for the
	// dashboard's pages: 110 ms a page of 100,000 receipts instead of
	// 0.7); run at open and with every Prune. PostgreSQL's autovacuum does
	// it by itself.
	tune []string
}

// q is query with the dialect's placeholders.
func (s *database) q(query string) string {
	if !s.d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// OpenSQLite opens (creating if needed) the SQLite database in dir.
func OpenSQLite(dir string) (Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipts: create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// WAL lets the dashboard read while a follower writes; busy_timeout
	// makes a writer wait for another instead of failing at once.
	// _txlock=immediate: a transaction takes the write lock when it
	// begins, so one that reads before it writes (a replaced receipt's
	// figures) never reads what another writer is changing.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	// Replicas that start at once on a new file race to turn it to WAL:
	// SQLite answers the losers SQLITE_BUSY at once, without waiting on
	// busy_timeout (the switch needs the file to itself, and waiting could
	// deadlock), so an open is tried again for as long as busy_timeout
	// would have waited.
	deadline := time.Now().Add(10 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("receipts: open %s: %w", path, err)
		}
		s, err := open(context.Background(), db, sqliteDialect, path)
		if err == nil || !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return s, err
		}
		time.Sleep(wait)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// OpenPostgres connects to the PostgreSQL database at url (postgres://…)
// and brings its schema up to date.
func OpenPostgres(ctx context.Context, url string) (Store, error) {
	where, err := postgresWhere(url)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("receipts: PostgreSQL %s: %w", where, err)
	}
	// The dashboard and the followers of one replica; the server's own
	// limit (100 by default) is shared by every replica.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	ping, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.PingContext(ping); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipts: connect to PostgreSQL %s: %s", where, oneLine(err.Error()))
	}
	return open(ctx, db, postgresDialect, where)
}

// postgresWhere names the database of url without its password, or says
// what is wrong with url.
func postgresWhere(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("receipts: the database URL is not postgres://user:password@host:port/database")
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return "", fmt.Errorf("receipts: the database URL does not parse: %s", redactURL(err.Error(), u))
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database), nil
}

// oneLine folds pgx's report of each address it tried (one line each)
// into the one line a failed start prints.
func oneLine(msg string) string {
	var parts []string
	for _, p := range strings.Split(msg, "\n") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// redactURL removes the URL's password from msg.
func redactURL(msg string, u *url.URL) string {
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

func open(ctx context.Context, db *sql.DB, d dialect, where string) (Store, error) {
	s := newSQLStore(db, d, where)
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("receipts: bring the schema of %s up to date: %w", where, err)
	}
	if err := s.tune(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *database) tune(ctx context.Context) error {
	for _, q := range s.d.tune {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("receipts: %s in %s: %w", q, s.where, err)
		}
	}
	return nil
}

func (s *database) Where() string { return s.where }

func (s *database) Close() error { return s.db.Close() }

const runColumns = `task_id, repo, repo_id, installation_id, number, issue, mode, status, attempt, branch, url, cost_usd, duration_s, tokens_in, tokens_out, steps, error, ended_at, title, cost_unknown, requester, model`

const insertRun = `INSERT INTO runs (` + runColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// replaceRun is insertRun that replaces the receipt of the same task.
const replaceRun = insertRun + ` ON CONFLICT (task_id) DO UPDATE SET repo = excluded.repo, repo_id = excluded.repo_id,
	installation_id = excluded.installation_id, number = excluded.number, issue = excluded.issue, mode = excluded.mode,
	status = excluded.status, attempt = excluded.attempt, branch = excluded.branch, url = excluded.url, cost_usd = excluded.cost_usd,
	duration_s = excluded.duration_s, tokens_in = excluded.tokens_in, tokens_out = excluded.tokens_out, steps = excluded.steps,
	error = excluded.error, ended_at = excluded.ended_at, title = excluded.title, cost_unknown = excluded.cost_unknown,
	requester = excluded.requester, model = excluded.model`

func (s *receiptRows) Put(ctx context.Context, r Run) error { return s.PutMany(ctx, []Run{r}) }

func (s *receiptRows) PutMany(ctx context.Context, runs []Run) error {
	_, err := s.writeRuns(ctx, replaceRun, runs)
	return err
}

func (s *receiptRows) Import(ctx context.Context, runs []Run) (int, error) {
	return s.writeRuns(ctx, insertRun+` ON CONFLICT (task_id) DO NOTHING`, runs)
}

// writeRuns runs query for each receipt in one transaction, keeps the day
// table's figures with them, and counts the receipts it wrote.
func (s *receiptRows) writeRuns(ctx context.Context, query string, runs []Run) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("receipts: begin a write to %s: %w", s.where, err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, s.q(query))
	if err != nil {
		return 0, fmt.Errorf("receipts: prepare a write to %s: %w", s.where, err)
	}
	defer stmt.Close()
	if s.d.lockReceipts != "" {
		if _, err := tx.ExecContext(ctx, s.d.lockReceipts); err != nil {
			return 0, fmt.Errorf("receipts: lock the receipts of %s: %w", s.where, err)
		}
	}
	n := 0
	for _, r := range runs {
		wrote, err := s.writeRun(ctx, tx, stmt, r)
		if err != nil {
			return 0, err
		}
		n += wrote
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("receipts: commit to %s: %w", s.where, err)
	}
	return n, nil
}

// writeRun writes one receipt and moves its figures in the day table: out
// of the replaced receipt's row, into its own.
func (s *receiptRows) writeRun(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, r Run) (int, error) {
	if r.TaskID == "" || r.Repo == "" {
		return 0, errors.New("receipts: a receipt needs a task id and a repository")
	}
	old, kept, err := s.days.keptRow(ctx, tx, r.TaskID)
	if err != nil {
		return 0, err
	}
	res, err := stmt.ExecContext(ctx, r.TaskID, r.Repo, r.RepoID, r.InstallationID, r.Number, r.Issue, r.Mode, r.Status, r.Attempt, r.Branch, r.URL,
		r.CostUSD, r.DurationSeconds, r.InputTokens, r.OutputTokens, r.Steps, r.Error, r.EndedAt.UnixMilli(), r.Title,
		boolInt(r.CostUnknown), r.Requester, r.Model)
	if err != nil {
		return 0, fmt.Errorf("receipts: store %s of %s in %s: %w", r.TaskID, r.Repo, s.where, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err // kept already, and left as it was (Import)
	}
	if kept {
		if err := s.days.addDay(ctx, tx, old, -1); err != nil {
			return 0, err
		}
	}
	return 1, s.days.addDay(ctx, tx, dayRowOf(r), 1)
}
