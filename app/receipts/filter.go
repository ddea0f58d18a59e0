package receipts

import (
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

// where is the filter as an SQL condition on runs and its arguments.
func (f Filter) where() (string, []any) { return f.cond("ended_at") }

// cond is the filter as an SQL condition, at the name of its time column.
func (f Filter) cond(at string) (string, []any) {
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
		conds = append(conds, at+" >= ?")
		args = append(args, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		conds = append(conds, at+" < ?")
		args = append(args, f.To.UnixMilli())
	}
	return strings.Join(conds, " AND "), args
}

// figures is where the dashboard's sums come from for a filter: the day
// table (run_days: runs, cost and duration added up per day, repository,
// mode and status as receipts are kept; a few rows a day, whatever the
// number of receipts) when the filter can be answered there (whole days,
// no single task), else the receipts themselves. Money and time are summed
// as whole micro-dollars and milliseconds either way, so both give the
// same figures to the last digit.
type figures struct {
	table, where string
	args         []any
	// at is the time column; unit is what one row counts of runs; cost
	// and duration are a row's micro-dollars and milliseconds.
	at, unit, cost, duration string
}

// sum is the SQL sum of expr as a whole number.
func (figures) sum(expr string) string { return "CAST(SUM(" + expr + ") AS BIGINT)" }

func (f Filter) figures() figures {
	if f.TaskID == "" && wholeDay(f.From) && wholeDay(f.To) {
		where, args := f.cond("day")
		return figures{table: "run_days", where: where, args: args, at: "day", unit: "runs", cost: "cost_micros", duration: "duration_ms"}
	}
	where, args := f.where()
	return figures{table: "runs", where: where, args: args, at: "ended_at", unit: "1",
		cost: "ROUND(cost_usd * 1000000)", duration: "ROUND(duration_s * 1000)"}
}

// wholeDay: t is unset or the start of a UTC day.
func wholeDay(t time.Time) bool { return t.IsZero() || t.UnixMilli()%day.Milliseconds() == 0 }

const day = 24 * time.Hour
