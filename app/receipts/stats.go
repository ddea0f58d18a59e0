package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"
)

// sums are a set of runs' figures as the database adds them up.
type sums struct {
	runs, succeeded, costMicros, durationMs sql.NullInt64
}

// columns are the SQL of the sums (the succeeded one takes
// StatusCompleted as its parameter), for SELECT.
func (f figures) columns() string {
	return f.sum(f.unit) + ", " + f.sum("CASE WHEN status = ? THEN "+f.unit+" ELSE 0 END") + ", " + f.sum(f.cost) + ", " + f.sum(f.duration)
}

func (v *sums) dest() []any { return []any{&v.runs, &v.succeeded, &v.costMicros, &v.durationMs} }

func (v sums) costUSD() float64 { return float64(v.costMicros.Int64) / 1e6 }

func (v sums) avgSeconds() float64 {
	if v.runs.Int64 == 0 {
		return 0
	}
	return float64(v.durationMs.Int64) / 1000 / float64(v.runs.Int64)
}

func (s *receiptRows) Stats(ctx context.Context, f Filter) (Stats, error) {
	fig := f.figures()
	st := Stats{Groups: []Group{}, Failures: []StatusCount{}, Series: []Bucket{}, Expensive: []Run{}}
	var total sums
	var first, last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q("SELECT "+fig.columns()+", MIN("+fig.at+"), MAX("+fig.at+") FROM "+fig.table+" WHERE "+fig.where),
		append([]any{StatusCompleted}, fig.args...)...).Scan(append(total.dest(), &first, &last)...); err != nil {
		return st, fmt.Errorf("receipts: totals in %s: %w", s.where, err)
	}
	st.Runs, st.Succeeded, st.CostUSD = int(total.runs.Int64), int(total.succeeded.Int64), total.costUSD()
	if st.Runs == 0 {
		return st, nil
	}
	if err := s.groups(ctx, &st, fig); err != nil {
		return st, err
	}
	if err := s.failures(ctx, &st, fig); err != nil {
		return st, err
	}
	where, args := f.where()
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+runColumns+" FROM runs WHERE "+where+" ORDER BY cost_usd DESC, task_id LIMIT ?"), append(args, TopN)...)
	if err != nil {
		return st, fmt.Errorf("receipts: most expensive runs in %s: %w", s.where, err)
	}
	if st.Expensive, err = scanRuns(rows); err != nil {
		return st, err
	}
	return st, s.series(ctx, &st, fig, first.Int64, last.Int64)
}

// groups fills st.Groups: the figures by repository and mode.
func (s *receiptRows) groups(ctx context.Context, st *Stats, fig figures) error {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT repo, mode, "+fig.columns()+" FROM "+fig.table+" WHERE "+fig.where+
		" GROUP BY repo, mode ORDER BY repo, mode"), append([]any{StatusCompleted}, fig.args...)...)
	if err != nil {
		return fmt.Errorf("receipts: group runs in %s: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var g Group
		var v sums
		if err := rows.Scan(append([]any{&g.Repo, &g.Mode}, v.dest()...)...); err != nil {
			return fmt.Errorf("receipts: read a group: %w", err)
		}
		g.Runs, g.Succeeded, g.CostUSD, g.AvgDurationSeconds = int(v.runs.Int64), int(v.succeeded.Int64), v.costUSD(), v.avgSeconds()
		st.Groups = append(st.Groups, g)
	}
	return rows.Err()
}

// failures fills st.Failures: the commonest statuses but completed.
func (s *receiptRows) failures(ctx context.Context, st *Stats, fig figures) error {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT status, "+fig.sum(fig.unit)+" AS n FROM "+fig.table+" WHERE "+fig.where+
		" AND status != ? GROUP BY status ORDER BY n DESC, status LIMIT ?"), append(fig.args, StatusCompleted, TopN)...)
	if err != nil {
		return fmt.Errorf("receipts: failure statuses in %s: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c StatusCount
		if err := rows.Scan(&c.Status, &c.Runs); err != nil {
			return fmt.Errorf("receipts: read a status: %w", err)
		}
		st.Failures = append(st.Failures, c)
	}
	return rows.Err()
}

// series fills st.Series with every bucket from the day of the first run
// to the day of the last, so the chart's time axis has no holes.
func (s *receiptRows) series(ctx context.Context, st *Stats, fig figures, first, last int64) error {
	origin := time.UnixMilli(first).UTC().Truncate(day)
	days := int(time.UnixMilli(last).UTC().Sub(origin)/day) + 1
	st.BucketDays = int(math.Ceil(float64(days) / MaxBuckets))
	width := int64(st.BucketDays) * day.Milliseconds()
	n := int((int64(days)*day.Milliseconds() + width - 1) / width)
	st.Series = make([]Bucket, n)
	for i := range st.Series {
		st.Series[i].Start = origin.Add(time.Duration(int64(i) * width * int64(time.Millisecond)))
	}
	rows, err := s.db.QueryContext(ctx, s.q("SELECT ("+fig.at+" - ?) / ? AS b, "+fig.columns()+" FROM "+fig.table+" WHERE "+fig.where+" GROUP BY b"),
		append([]any{origin.UnixMilli(), width, StatusCompleted}, fig.args...)...)
	if err != nil {
		return fmt.Errorf("receipts: series in %s: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var v sums
		if err := rows.Scan(append([]any{&i}, v.dest()...)...); err != nil {
			return fmt.Errorf("receipts: read a bucket: %w", err)
		}
		if i >= 0 && i < n {
			st.Series[i].Runs, st.Series[i].CostUSD, st.Series[i].AvgDurationSeconds = int(v.runs.Int64), v.costUSD(), v.avgSeconds()
		}
	}
	return rows.Err()
}

func (s *receiptRows) Repos(ctx context.Context, f Filter) ([]string, error) {
	where, args := Filter{RepoIDs: f.RepoIDs}.cond("day")
	rows, err := s.db.QueryContext(ctx, s.q("SELECT DISTINCT repo FROM run_days WHERE "+where+" ORDER BY repo"), args...)
	if err != nil {
		return nil, fmt.Errorf("receipts: list repositories in %s: %w", s.where, err)
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
