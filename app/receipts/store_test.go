package receipts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

var day0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func seed(t *testing.T, s *Store) []Run {
	t.Helper()
	runs := []Run{
		{TaskID: "T-00000001", Repo: "o/a", Mode: "execute", Status: "completed", CostUSD: 1.5, DurationSeconds: 60, EndedAt: day0},
		{TaskID: "T-00000002", Repo: "o/a", Mode: "execute", Status: "failed", CostUSD: 0.5, DurationSeconds: 30, EndedAt: day0.Add(day)},
		{TaskID: "T-00000003", Repo: "o/a", Mode: "plan", Status: "completed", CostUSD: 0.25, DurationSeconds: 20, EndedAt: day0.Add(day)},
		{TaskID: "T-00000004", Repo: "o/b", Mode: "revise", Status: "timeout", CostUSD: 3, DurationSeconds: 600, EndedAt: day0.Add(3 * day)},
		{TaskID: "T-00000005", Repo: "o/b", Mode: "revise", Status: "failed", CostUSD: 0.1, DurationSeconds: 5, EndedAt: day0.Add(3 * day)},
	}
	for i := range runs {
		// o/a is repository 101, o/b 102.
		runs[i].RepoID = 100 + int64(runs[i].Repo[2]-'a'+1)
		runs[i].URL = fmt.Sprintf("https://github.example/%s/issues/%d", runs[i].Repo, i+1)
		runs[i].Number, runs[i].Issue = i+1, i+1
	}
	if err := s.PutMany(context.Background(), runs); err != nil {
		t.Fatal(err)
	}
	return runs
}

// seeded is a new store holding seed's receipts, closed when t ends.
func seeded(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	seed(t, s)
	return s
}

func TestStoreKeepsReceiptsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := seed(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.List(context.Background(), Filter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != len(want) || len(p.Runs) != len(want) {
		t.Fatalf("after reopening: %d runs (total %d), want %d", len(p.Runs), p.Total, len(want))
	}
	got := map[string]Run{}
	for _, r := range p.Runs {
		got[r.TaskID] = r
	}
	for _, w := range want {
		if got[w.TaskID] != w {
			t.Errorf("after reopening %s = %+v, want %+v", w.TaskID, got[w.TaskID], w)
		}
	}
}

func TestStoreFiltersAndPages(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    Filter
		want int
	}{
		{"all", Filter{}, 5},
		{"repo", Filter{Repo: "o/a"}, 3},
		{"mode", Filter{Mode: "revise"}, 2},
		{"status", Filter{Status: "failed"}, 2},
		{"date range", Filter{From: day0.Add(day).Truncate(day), To: day0.Add(2 * day)}, 2},
		{"access to o/b only", Filter{RepoIDs: []int64{102}}, 2},
		{"access to o/b, asking for o/a", Filter{RepoIDs: []int64{102}, Repo: "o/a"}, 0},
		{"no access", Filter{RepoIDs: []int64{}}, 0},
		{"task", Filter{TaskID: "T-00000004"}, 1},
	} {
		p, err := s.List(ctx, c.f, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if p.Total != c.want || len(p.Runs) != c.want {
			t.Errorf("%s: %d runs (total %d), want %d", c.name, len(p.Runs), p.Total, c.want)
		}
	}
	p, err := s.List(ctx, Filter{}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 5 || len(p.Runs) != 2 || p.Runs[0].TaskID != "T-00000002" || p.Runs[1].TaskID != "T-00000003" {
		t.Errorf("second page of two: total %d, runs %+v; want T-00000002, T-00000003 (newest first, then by task id)", p.Total, p.Runs)
	}
}

func TestStoreStats(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	st, err := s.Stats(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 5 || st.Succeeded != 2 || st.CostUSD != 5.35 {
		t.Errorf("totals: %d runs, %d succeeded, $%v; want 5, 2, $5.35", st.Runs, st.Succeeded, st.CostUSD)
	}
	if len(st.Groups) != 3 || st.Groups[0].Repo != "o/a" || st.Groups[0].Mode != "execute" || st.Groups[0].SuccessRate() != 0.5 {
		t.Errorf("groups: %+v; want o/a execute at 50%% first of 3", st.Groups)
	}
	if len(st.Failures) != 2 || st.Failures[0] != (StatusCount{"failed", 2}) || st.Failures[1] != (StatusCount{"timeout", 1}) {
		t.Errorf("failures: %+v; want failed 2, timeout 1", st.Failures)
	}
	if len(st.Expensive) != 5 || st.Expensive[0].TaskID != "T-00000004" {
		t.Errorf("most expensive first: %+v; want T-00000004", st.Expensive)
	}
	// Four days from the first run to the last, one bucket a day, the
	// empty third day included.
	if st.BucketDays != 1 || len(st.Series) != 4 {
		t.Fatalf("series: %d buckets of %d days; want 4 of 1", len(st.Series), st.BucketDays)
	}
	wantRuns := []int{1, 2, 0, 2}
	for i, b := range st.Series {
		if b.Runs != wantRuns[i] || !b.Start.Equal(day0.Truncate(day).Add(time.Duration(i)*day)) {
			t.Errorf("bucket %d: %d runs from %s; want %d from day %d", i, b.Runs, b.Start, wantRuns[i], i)
		}
	}
	if st.Series[3].CostUSD != 3.1 || st.Series[3].AvgDurationSeconds != 302.5 {
		t.Errorf("last bucket: $%v, %vs average; want $3.1, 302.5s", st.Series[3].CostUSD, st.Series[3].AvgDurationSeconds)
	}
	none, err := s.Stats(context.Background(), Filter{RepoIDs: []int64{}})
	if err != nil || none.Runs != 0 || len(none.Series) != 0 {
		t.Errorf("no access: %+v, %v; want no runs", none, err)
	}
}

func TestStoreQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	for _, f := range []Filter{{}, {Repo: "o/a"}, {Status: "failed"}, {Mode: "plan"}, {RepoIDs: []int64{101, 102}}} {
		where, args := f.where()
		rows, err := s.db.Query("EXPLAIN QUERY PLAN SELECT task_id FROM runs WHERE "+where+" ORDER BY ended_at DESC LIMIT 50", args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		indexed := false
		for _, p := range plan {
			if strings.Contains(p, "USING INDEX") || strings.Contains(p, "USING COVERING INDEX") {
				indexed = true
			}
		}
		if !indexed {
			t.Errorf("filter %+v: page query plan %q uses no index", f, plan)
		}
	}
}

// A database of a bot from before the repository id gains the column on
// open; its receipts keep everything and get id 0, which no person's
// access matches (the operator's dashboard still shows them).
func TestStoreMigratesAnOldDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The schema as it was: no repo_id.
	if _, err := s.db.Exec(`DROP TABLE runs; CREATE TABLE runs (task_id TEXT PRIMARY KEY, repo TEXT NOT NULL, installation_id INTEGER NOT NULL,
		number INTEGER NOT NULL, issue INTEGER NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL, branch TEXT NOT NULL,
		url TEXT NOT NULL, cost_usd REAL NOT NULL, duration_s REAL NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,
		steps INTEGER NOT NULL, error TEXT NOT NULL, ended_at INTEGER NOT NULL);
		INSERT INTO runs VALUES ('T-0000000A', 'o/a', 1, 1, 1, 'plan', 'completed', 1, '', '', 0.5, 10, 1, 1, 1, '', 1000);`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.List(context.Background(), Filter{}, 0, 10)
	if err != nil || all.Total != 1 || all.Runs[0].RepoID != 0 || all.Runs[0].CostUSD != 0.5 {
		t.Fatalf("the old receipt after the migration: %+v %v", all, err)
	}
	if p, _ := s.List(context.Background(), Filter{RepoIDs: []int64{1, 101}}, 0, 10); p.Total != 0 {
		t.Error("a person's access sees the receipt without an id")
	}
}
