package receipts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Where the money went: the usage page adds the receipts up by day of a
// month and by month of a year, by repository, requester, model and kind
// of run. Money is summed in whole micro-dollars (each receipt's cost
// rounded once), so a page's figures are the receipts' sum to the cent
// and do not drift with the number of receipts. Runs whose cost nobody
// reported are counted apart, never added as $0.

// usageIndexes cover the usage queries, read from an index alone (no
// table lookups): a month's range of ended_at for the operator, and of
// each repository a signed-in reader may see (2.4 times faster than the
// index on repo_id and ended_at that looks each row up, 100,000 receipts).
var usageIndexes = []string{
	`CREATE INDEX runs_usage ON runs(ended_at, repo_id, repo, installation_id, requester, model, mode, cost_unknown, cost_usd, tokens_in, tokens_out)`,
	`CREATE INDEX runs_usage_repo ON runs(repo_id, ended_at, repo, installation_id, requester, model, mode, cost_unknown, cost_usd, tokens_in, tokens_out)`,
}

// limitsTable keeps the budgets that applied to each repository's last
// admitted run: the server's, lowered by the organisation's and the
// repository's .sandbox.yml. The usage page shows them beside the spend;
// only an admission knows them (the configuration is read then).
const limitsTable = `CREATE TABLE budget_limits (
	installation_id  BIGINT NOT NULL,
	repo             TEXT NOT NULL, -- lower case
	installation_usd DOUBLE PRECISION NOT NULL,
	repo_usd         DOUBLE PRECISION NOT NULL,
	updated_at       BIGINT NOT NULL, -- unix milliseconds
	PRIMARY KEY (installation_id, repo)
)`

// Usage is what the usage page reads.
type Usage interface {
	// Usage adds up the receipts f sees that ended from bounds[0] to the
	// last bound: a row's Bucket i is [bounds[i], bounds[i+1]). With
	// detail the rows are by repository, installation, requester, model
	// and mode as well. f's From and To are replaced by the bounds.
	Usage(ctx context.Context, f Filter, bounds []time.Time, detail bool) ([]UsageRow, error)
	// KeepLimits records the budgets an admission applied to a
	// repository, replacing the ones recorded before.
	KeepLimits(ctx context.Context, l Limits) error
	// Limits are the budgets recorded for the repositories (any case).
	Limits(ctx context.Context, repos []string) ([]Limits, error)
}

// usageRows are the Usage: the usage page's figures, from the receipts
// and the usage_days table, and the budget limits the admissions applied.
type usageRows struct{ *database }

// UsageRow is the receipts of one bucket (and, in detail, of one
// repository, installation, requester, model and kind of run).
type UsageRow struct {
	Bucket         int
	Repo           string
	InstallationID int64
	Requester      string
	Model          string
	Mode           string
	Runs           int
	// Unknown counts the runs of unknown cost; CostMicros is what the
	// others cost, in micro-dollars.
	Unknown                   int
	CostMicros                int64
	InputTokens, OutputTokens int64
}

// Add adds o's figures to r's (not its keys).
func (r *UsageRow) Add(o UsageRow) {
	r.Runs += o.Runs
	r.Unknown += o.Unknown
	r.CostMicros += o.CostMicros
	r.InputTokens += o.InputTokens
	r.OutputTokens += o.OutputTokens
}

// Limits are the budgets (0: none) that applied to a repository's runs.
type Limits struct {
	InstallationID int64
	// Repo is owner/name in lower case.
	Repo            string
	InstallationUSD float64
	RepoUSD         float64
	UpdatedAt       time.Time
}

// maxBounds bounds a usage query's buckets (a month's days, a year's
// months, with room).
const maxBounds = 400

func (s *usageRows) Usage(ctx context.Context, f Filter, bounds []time.Time, detail bool) ([]UsageRow, error) {
	if len(bounds) < 2 || len(bounds) > maxBounds {
		return nil, fmt.Errorf("receipts: a usage query takes 2 to %d bounds, not %d", maxBounds, len(bounds))
	}
	f.From, f.To = bounds[0], bounds[len(bounds)-1]
	if detail || f.Mode != "" || f.Status != "" || f.TaskID != "" {
		return s.usage(ctx, receiptSums, f, bounds, detail, "", nil)
	}
	// Whole UTC days from the day table; the days a bound cuts (a month
	// that starts at another hour than midnight UTC) from the receipts.
	var cut []string
	var cutArgs []any
	for _, b := range bounds {
		ms := b.UnixMilli()
		if d := ms - ms%day.Milliseconds(); d != ms && !slices.Contains(cutArgs, any(d)) {
			cut = append(cut, "(ended_at >= ? AND ended_at < ?)")
			cutArgs = append(cutArgs, d, d+day.Milliseconds())
		}
	}
	notCut := ""
	var days []any
	for i := 0; i < len(cutArgs); i += 2 {
		days = append(days, cutArgs[i])
	}
	if len(days) > 0 {
		notCut = " AND day NOT IN (?" + strings.Repeat(",?", len(days)-1) + ")"
	}
	out, err := s.usage(ctx, daySums, f, bounds, false, notCut, days)
	if err != nil || len(cut) == 0 {
		return out, err
	}
	edges, err := s.usage(ctx, receiptSums, f, bounds, false, " AND ("+strings.Join(cut, " OR ")+")", cutArgs)
	if err != nil {
		return nil, err
	}
	return mergeBuckets(out, edges), nil
}

// usageSource is where a usage query reads: the receipts, or the day table.
type usageSource struct {
	table, at                          string
	runs, unknown, cost, tokIn, tokOut string
}

var (
	receiptSums = usageSource{table: "runs", at: "ended_at", runs: "COUNT(*)", unknown: "SUM(cost_unknown)",
		cost: "SUM(CASE WHEN cost_unknown = 0 THEN ROUND(cost_usd * 1000000) ELSE 0 END)", tokIn: "SUM(tokens_in)", tokOut: "SUM(tokens_out)"}
	daySums = usageSource{table: "usage_days", at: "day", runs: "SUM(runs)", unknown: "SUM(unknown_runs)", cost: "SUM(cost_micros)",
		tokIn: "SUM(tokens_in)", tokOut: "SUM(tokens_out)"}
)

// usage runs one usage query on src, narrowed further by extra.
func (s *usageRows) usage(ctx context.Context, src usageSource, f Filter, bounds []time.Time, detail bool, extra string, extraArgs []any) ([]UsageRow, error) {
	where, whereArgs := f.cond(src.at)
	// The bucket of a row, by its time: CASE over the inner bounds (days
	// and months in the budgets' time zone are not of one length).
	var b strings.Builder
	var args []any
	for i, t := range bounds[1 : len(bounds)-1] {
		b.WriteString(" WHEN " + src.at + " < ? THEN " + strconv.Itoa(i))
		args = append(args, t.UnixMilli())
	}
	bucket := "0"
	if w, ok := evenWidth(bounds); ok && len(bounds) > 2 {
		// Buckets of one width (a month's days in UTC): arithmetic, not a
		// comparison per bound.
		bucket, args = "("+src.at+" - ?) / ?", []any{bounds[0].UnixMilli(), w}
	} else if b.Len() > 0 {
		bucket = "CASE" + b.String() + " ELSE " + strconv.Itoa(len(bounds)-2) + " END"
	}
	keys := "b"
	cols := bucket + " AS b"
	if detail {
		keys = "b, repo, installation_id, requester, model, mode"
		cols += ", repo, installation_id, requester, model, mode"
	}
	n := func(e string) string { return "CAST(" + e + " AS BIGINT)" }
	query := "SELECT " + cols + ", " + n(src.runs) + ", " + n(src.unknown) + ", " + n(src.cost) + ", " + n(src.tokIn) + ", " + n(src.tokOut) +
		" FROM " + src.table + " WHERE " + where + extra + " GROUP BY " + keys + " ORDER BY " + keys
	args = append(append(args, whereArgs...), extraArgs...)
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("receipts: add up the usage in %s: %w", s.where, err)
	}
	defer rows.Close()
	out := []UsageRow{}
	for rows.Next() {
		var r UsageRow
		dest := []any{&r.Bucket}
		if detail {
			dest = append(dest, &r.Repo, &r.InstallationID, &r.Requester, &r.Model, &r.Mode)
		}
		if err := rows.Scan(append(dest, &r.Runs, &r.Unknown, &r.CostMicros, &r.InputTokens, &r.OutputTokens)...); err != nil {
			return nil, fmt.Errorf("receipts: read the usage in %s: %w", s.where, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// evenWidth is the bounds' one width in milliseconds, if they have one.
func evenWidth(bounds []time.Time) (int64, bool) {
	w := bounds[1].Sub(bounds[0]).Milliseconds()
	for i := 2; i < len(bounds); i++ {
		if bounds[i].Sub(bounds[i-1]).Milliseconds() != w {
			return 0, false
		}
	}
	return w, w > 0
}

// mergeBuckets adds b's rows (by bucket only) into a's, in bucket order.
func mergeBuckets(a, b []UsageRow) []UsageRow {
	by := map[int]*UsageRow{}
	for _, rs := range [][]UsageRow{a, b} {
		for _, r := range rs {
			m := by[r.Bucket]
			if m == nil {
				m = &UsageRow{Bucket: r.Bucket}
				by[r.Bucket] = m
			}
			m.Add(r)
		}
	}
	out := make([]UsageRow, 0, len(by))
	for _, m := range by {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(x, y UsageRow) int { return x.Bucket - y.Bucket })
	return out
}

func (s *usageRows) KeepLimits(ctx context.Context, l Limits) error {
	if l.Repo == "" {
		return errors.New("receipts: budget limits need a repository")
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO budget_limits (installation_id, repo, installation_usd, repo_usd, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (installation_id, repo) DO UPDATE SET installation_usd = excluded.installation_usd, repo_usd = excluded.repo_usd, updated_at = excluded.updated_at`),
		l.InstallationID, strings.ToLower(l.Repo), l.InstallationUSD, l.RepoUSD, l.UpdatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("receipts: keep the budgets of %s in %s: %w", l.Repo, s.where, err)
	}
	return nil
}

func (s *usageRows) Limits(ctx context.Context, repos []string) ([]Limits, error) {
	out := []Limits{}
	if len(repos) == 0 {
		return out, nil
	}
	args := make([]any, len(repos))
	for i, r := range repos {
		args[i] = strings.ToLower(r)
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT installation_id, repo, installation_usd, repo_usd, updated_at FROM budget_limits
WHERE repo IN (?`+strings.Repeat(",?", len(repos)-1)+`) ORDER BY repo, installation_id`), args...)
	if err != nil {
		return nil, fmt.Errorf("receipts: read the budgets in %s: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var l Limits
		var at int64
		if err := rows.Scan(&l.InstallationID, &l.Repo, &l.InstallationUSD, &l.RepoUSD, &at); err != nil {
			return nil, fmt.Errorf("receipts: read the budgets in %s: %w", s.where, err)
		}
		l.UpdatedAt = time.UnixMilli(at).UTC()
		out = append(out, l)
	}
	return out, rows.Err()
}
