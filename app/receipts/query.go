package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"
)

// Filter narrows the receipts a query sees. The zero Filter sees all.
type Filter struct {
	// RepoIDs are the repositories the reader may see, by GitHub's id
	// (names change hands: a rename, a transfer, a deletion and a new
	// repository of the old name); nil means every repository, an empty
	// non-nil slice none.
	RepoIDs []int64
	// Repo, Mode, Status and TaskID match exactly when set.
	Repo, Mode, Status, TaskID string
	// From and To bound EndedAt: From inclusive, To exclusive.
	From, To time.Time
}

// where is the filter as an SQL condition and its arguments.
func (f Filter) where() (string, []any) {
	conds, args := []string{"1=1"}, []any{}
	if f.RepoIDs != nil {
		if len(f.RepoIDs) == 0 {
			return "0=1", nil
		}
		conds = append(conds, "repo_id IN (?"+strings.Repeat(",?", len(f.RepoIDs)-1)+")")
		for _, id := range f.RepoIDs {
			args = append(args, id)
		}
	}
	for _, c := range []struct {
		col, val string
	}{{"repo", f.Repo}, {"mode", f.Mode}, {"status", f.Status}, {"task_id", f.TaskID}} {
		if c.val != "" {
			conds = append(conds, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if !f.From.IsZero() {
		conds = append(conds, "ended_at >= ?")
		args = append(args, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		conds = append(conds, "ended_at < ?")
		args = append(args, f.To.UnixMilli())
	}
	return strings.Join(conds, " AND "), args
}

const runColumns = `task_id, repo, repo_id, installation_id, number, issue, mode, status, attempt, branch, url, cost_usd, duration_s, tokens_in, tokens_out, steps, error, ended_at, title`

func scanRuns(rows *sql.Rows) ([]Run, error) {
	defer rows.Close()
	runs := []Run{}
	for rows.Next() {
		var r Run
		var ended int64
		if err := rows.Scan(&r.TaskID, &r.Repo, &r.RepoID, &r.InstallationID, &r.Number, &r.Issue, &r.Mode, &r.Status, &r.Attempt, &r.Branch, &r.URL,
			&r.CostUSD, &r.DurationSeconds, &r.InputTokens, &r.OutputTokens, &r.Steps, &r.Error, &ended, &r.Title); err != nil {
			return nil, fmt.Errorf("receipts: read a run: %w", err)
		}
		r.EndedAt = time.UnixMilli(ended).UTC()
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// Page is one page of runs, newest first.
type Page struct {
	Runs   []Run `json:"runs"`
	Total  int   `json:"total"`
	Offset int   `json:"offset"`
	Limit  int   `json:"limit"`
}

// MaxPageSize bounds a page, so no request reads the whole table.
const MaxPageSize = 200

// List returns the runs matching f, newest first, from offset.
func (s *Store) List(ctx context.Context, f Filter, offset, limit int) (Page, error) {
	if limit <= 0 || limit > MaxPageSize {
		limit = MaxPageSize
	}
	offset = max(offset, 0)
	where, args := f.where()
	p := Page{Offset: offset, Limit: limit}
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM runs WHERE "+where, args...).Scan(&p.Total); err != nil {
		return p, fmt.Errorf("receipts: count runs in %s: %w", s.path, err)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+runColumns+" FROM runs WHERE "+where+" ORDER BY ended_at DESC, task_id LIMIT ? OFFSET ?",
		append(args, limit, offset)...)
	if err != nil {
		return p, fmt.Errorf("receipts: list runs in %s: %w", s.path, err)
	}
	if p.Runs, err = scanRuns(rows); err != nil {
		return p, err
	}
	return p, nil
}

// Group is the runs of one repository in one mode.
type Group struct {
	Repo               string  `json:"repo"`
	Mode               string  `json:"mode"`
	Runs               int     `json:"runs"`
	Succeeded          int     `json:"succeeded"`
	CostUSD            float64 `json:"cost_usd"`
	AvgDurationSeconds float64 `json:"avg_duration_seconds"`
}

// SuccessRate is the share of the group's runs that completed, 0 to 1.
func (g Group) SuccessRate() float64 { return rate(g.Succeeded, g.Runs) }

// StatusCount is how many runs ended with one status.
type StatusCount struct {
	Status string `json:"status"`
	Runs   int    `json:"runs"`
}

// Bucket is the runs that ended in one interval of the series.
type Bucket struct {
	Start              time.Time `json:"start"`
	Runs               int       `json:"runs"`
	CostUSD            float64   `json:"cost_usd"`
	AvgDurationSeconds float64   `json:"avg_duration_seconds"`
}

// Stats are the figures of the runs a filter sees.
type Stats struct {
	Runs      int           `json:"runs"`
	Succeeded int           `json:"succeeded"`
	CostUSD   float64       `json:"cost_usd"`
	Groups    []Group       `json:"by_repo_and_mode"`
	Failures  []StatusCount `json:"failure_statuses"`
	Expensive []Run         `json:"most_expensive"`
	// Series is cost and duration over time, BucketDays days a bucket,
	// every bucket from the first run to the last (empty ones included).
	Series     []Bucket `json:"series"`
	BucketDays int      `json:"bucket_days"`
}

// SuccessRate is the share of runs that completed, 0 to 1.
func (s Stats) SuccessRate() float64 { return rate(s.Succeeded, s.Runs) }

func rate(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// MaxBuckets bounds the series: a longer span gets wider buckets.
const MaxBuckets = 60

// TopN is how many failure statuses and expensive runs Stats returns.
const TopN = 10

const day = 24 * time.Hour

// Stats computes the figures of the runs f sees.
func (s *Store) Stats(ctx context.Context, f Filter) (Stats, error) {
	where, args := f.where()
	st := Stats{Groups: []Group{}, Failures: []StatusCount{}, Series: []Bucket{}}
	var first, last sql.NullInt64
	var cost sql.NullFloat64
	var succeeded sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(status = ?), SUM(cost_usd), MIN(ended_at), MAX(ended_at) FROM runs WHERE "+where,
		append([]any{StatusCompleted}, args...)...).Scan(&st.Runs, &succeeded, &cost, &first, &last); err != nil {
		return st, fmt.Errorf("receipts: totals in %s: %w", s.path, err)
	}
	st.Succeeded, st.CostUSD = int(succeeded.Int64), cost.Float64
	if st.Runs == 0 {
		st.Expensive = []Run{}
		return st, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT repo, mode, COUNT(*), SUM(status = ?), SUM(cost_usd), AVG(duration_s) FROM runs WHERE "+where+
		" GROUP BY repo, mode ORDER BY repo, mode", append([]any{StatusCompleted}, args...)...)
	if err != nil {
		return st, fmt.Errorf("receipts: group runs in %s: %w", s.path, err)
	}
	for rows.Next() {
		var g Group
		if err := rows.Scan(&g.Repo, &g.Mode, &g.Runs, &g.Succeeded, &g.CostUSD, &g.AvgDurationSeconds); err != nil {
			rows.Close()
			return st, fmt.Errorf("receipts: read a group: %w", err)
		}
		st.Groups = append(st.Groups, g)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, "SELECT status, COUNT(*) AS n FROM runs WHERE "+where+" AND status != ? GROUP BY status ORDER BY n DESC, status LIMIT ?",
		append(args, StatusCompleted, TopN)...)
	if err != nil {
		return st, fmt.Errorf("receipts: failure statuses in %s: %w", s.path, err)
	}
	for rows.Next() {
		var c StatusCount
		if err := rows.Scan(&c.Status, &c.Runs); err != nil {
			rows.Close()
			return st, fmt.Errorf("receipts: read a status: %w", err)
		}
		st.Failures = append(st.Failures, c)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, "SELECT "+runColumns+" FROM runs WHERE "+where+" ORDER BY cost_usd DESC, task_id LIMIT ?", append(args, TopN)...)
	if err != nil {
		return st, fmt.Errorf("receipts: most expensive runs in %s: %w", s.path, err)
	}
	if st.Expensive, err = scanRuns(rows); err != nil {
		return st, err
	}
	return st, s.series(ctx, &st, where, args, first.Int64, last.Int64)
}

// series fills st.Series with every bucket from the day of the first run
// to the day of the last, so the chart's time axis has no holes.
func (s *Store) series(ctx context.Context, st *Stats, where string, args []any, first, last int64) error {
	origin := time.UnixMilli(first).UTC().Truncate(day)
	days := int(time.UnixMilli(last).UTC().Sub(origin)/day) + 1
	st.BucketDays = int(math.Ceil(float64(days) / MaxBuckets))
	width := int64(st.BucketDays) * day.Milliseconds()
	n := int((int64(days)*day.Milliseconds() + width - 1) / width)
	st.Series = make([]Bucket, n)
	for i := range st.Series {
		st.Series[i].Start = origin.Add(time.Duration(int64(i) * width * int64(time.Millisecond)))
	}
	rows, err := s.db.QueryContext(ctx, "SELECT (ended_at - ?) / ? AS b, COUNT(*), SUM(cost_usd), AVG(duration_s) FROM runs WHERE "+where+" GROUP BY b",
		append([]any{origin.UnixMilli(), width}, args...)...)
	if err != nil {
		return fmt.Errorf("receipts: series in %s: %w", s.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var b Bucket
		if err := rows.Scan(&i, &b.Runs, &b.CostUSD, &b.AvgDurationSeconds); err != nil {
			return fmt.Errorf("receipts: read a bucket: %w", err)
		}
		if i >= 0 && i < n {
			b.Start = st.Series[i].Start
			st.Series[i] = b
		}
	}
	return rows.Err()
}

// Repos lists the repositories with receipts that f's access allows,
// ignoring f's other fields (for the repository filter's choices).
func (s *Store) Repos(ctx context.Context, f Filter) ([]string, error) {
	where, args := Filter{RepoIDs: f.RepoIDs}.where()
	rows, err := s.db.QueryContext(ctx, "SELECT DISTINCT repo FROM runs WHERE "+where+" ORDER BY repo", args...)
	if err != nil {
		return nil, fmt.Errorf("receipts: list repositories in %s: %w", s.path, err)
	}
	defer rows.Close()
	repos := []string{}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, fmt.Errorf("receipts: read a repository: %w", err)
		}
		repos = append(repos, r)
	}
	return repos, rows.Err()
}
