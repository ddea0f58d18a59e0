package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

func scanRuns(rows *sql.Rows) ([]Run, error) {
	defer rows.Close()
	runs := []Run{}
	for rows.Next() {
		var r Run
		var ended int64
		var unknown int
		if err := rows.Scan(&r.TaskID, &r.Repo, &r.RepoID, &r.InstallationID, &r.Number, &r.Issue, &r.Mode, &r.Status, &r.Attempt, &r.Branch, &r.URL,
			&r.CostUSD, &r.DurationSeconds, &r.InputTokens, &r.OutputTokens, &r.Steps, &r.Error, &ended, &r.Title,
			&unknown, &r.Requester, &r.Model); err != nil {
			return nil, fmt.Errorf("receipts: read a run: %w", err)
		}
		r.EndedAt, r.CostUnknown = time.UnixMilli(ended).UTC(), unknown == 1
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

func (s *receiptRows) List(ctx context.Context, f Filter, offset, limit int) (Page, error) {
	if limit <= 0 || limit > MaxPageSize {
		limit = MaxPageSize
	}
	offset = max(offset, 0)
	where, args := f.where()
	p := Page{Offset: offset, Limit: limit}
	fig := f.figures()
	var total sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q("SELECT "+fig.sum(fig.unit)+" FROM "+fig.table+" WHERE "+fig.where), fig.args...).Scan(&total); err != nil {
		return p, fmt.Errorf("receipts: count runs in %s: %w", s.where, err)
	}
	p.Total = int(total.Int64)
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+runColumns+" FROM runs WHERE "+where+" ORDER BY ended_at DESC, task_id LIMIT ? OFFSET ?"),
		append(args, limit, offset)...)
	if err != nil {
		return p, fmt.Errorf("receipts: list runs in %s: %w", s.where, err)
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
