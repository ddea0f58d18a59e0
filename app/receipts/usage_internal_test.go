package receipts

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// A database at version 4 (before the usage columns) holding receipts
// gains them on open, on both databases: a receipt that named a cost
// keeps it as known, one that named none is of unknown cost, and neither
// names a requester or a model.
func TestUsageMigratesAVersion4Database(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func(t *testing.T) (func() (Store, error), bool)
	}{
		{"sqlite", func(t *testing.T) (func() (Store, error), bool) {
			dir := t.TempDir()
			return func() (Store, error) { return OpenSQLite(dir) }, true
		}},
		{"postgres", func(t *testing.T) (func() (Store, error), bool) {
			url := testenv.Postgres(t)
			return func() (Store, error) { return OpenPostgres(context.Background(), url) }, true
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			open, _ := c.open(t)
			ctx := context.Background()
			st, err := open()
			if err != nil {
				t.Fatal(err)
			}
			s := st.(*sqlStore)
			day := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			if err := s.PutMany(ctx, []Run{{TaskID: "T-00000001", Repo: "o/a", Mode: "plan", Status: "completed", CostUSD: 0.25, EndedAt: day},
				{TaskID: "T-00000002", Repo: "o/a", Mode: "task", Status: "failed", EndedAt: day}}); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{`DROP INDEX runs_usage`, `DROP INDEX runs_usage_repo`, `DROP TABLE budget_limits`, `DROP TABLE usage_days`, `ALTER TABLE runs DROP COLUMN cost_unknown`,
				`ALTER TABLE runs DROP COLUMN requester`, `ALTER TABLE runs DROP COLUMN model`, `DELETE FROM schema_migrations WHERE version = 5`} {
				if _, err := s.db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s.Close()
			st, err = open()
			if err != nil {
				t.Fatalf("open the version 4 database: %v", err)
			}
			defer st.Close()
			p, err := st.List(ctx, Filter{}, 0, 10)
			if err != nil || len(p.Runs) != 2 {
				t.Fatalf("the receipts after the migration: %+v %v", p, err)
			}
			for _, r := range p.Runs {
				if r.CostUnknown != (r.TaskID == "T-00000002") || r.Requester != "" || r.Model != "" {
					t.Errorf("%s after the migration: unknown cost %v, requester %q, model %q", r.TaskID, r.CostUnknown, r.Requester, r.Model)
				}
			}
			rows, err := st.Usage(ctx, Filter{}, []time.Time{day.Truncate(24 * time.Hour), day.Add(24 * time.Hour)}, false)
			if err != nil || len(rows) != 1 || rows[0].CostMicros != 250000 || rows[0].Unknown != 1 || rows[0].Runs != 2 {
				t.Errorf("the usage of the migrated receipts: %+v %v; want 2 runs, $0.25 and 1 of unknown cost", rows, err)
			}
			if err := st.KeepLimits(ctx, Limits{InstallationID: 1, Repo: "o/a", RepoUSD: 5, UpdatedAt: day}); err != nil {
				t.Errorf("keep budgets in the migrated database: %v", err)
			}
		})
	}
}

// The usage queries read a month's range of an index that covers them:
// for the operator the one on ended_at, for a reader of some
// repositories the one on their ids.
func TestUsageQueriesUseTheirIndex(t *testing.T) {
	t.Parallel()
	s := openSQLite(t, t.TempDir())
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []Filter{{From: from, To: from.AddDate(0, 1, 0)}, {RepoIDs: []int64{101, 102}, From: from, To: from.AddDate(0, 1, 0)}} {
		where, args := f.where()
		plan := queryPlan(t, s, `SELECT repo, COUNT(*), SUM(cost_usd), SUM(tokens_in) FROM runs WHERE `+where+` GROUP BY repo, requester, model, mode`, args...)
		want := "COVERING INDEX runs_usage (ended_at>? AND ended_at<?)"
		if f.RepoIDs != nil {
			want = "COVERING INDEX runs_usage_repo (repo_id=? AND ended_at>? AND ended_at<?)"
		}
		if p := strings.Join(plan, "; "); !strings.Contains(p, want) {
			t.Errorf("filter %+v: the usage query's plan %q does not read runs_usage alone", f, plan)
		}
	}
}
