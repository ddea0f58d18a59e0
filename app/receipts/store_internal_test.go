package receipts

import (
	"context"
	"strings"
	"testing"
	"time"
)

func openSQLite(t *testing.T, dir string) *sqlStore {
	t.Helper()
	s, err := OpenSQLite(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*sqlStore)
}

// queryPlan is SQLite's plan of query, one line a step.
func queryPlan(t *testing.T, s *sqlStore, query string, args ...any) []string {
	t.Helper()
	rows, err := s.db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return plan
}

func TestStoreQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := openSQLite(t, t.TempDir())
	for _, f := range []Filter{{}, {Repo: "o/a"}, {Status: "failed"}, {Mode: "plan"}, {RepoIDs: []int64{101, 102}}} {
		where, args := f.where()
		plan := queryPlan(t, s, "SELECT task_id FROM runs WHERE "+where+" ORDER BY ended_at DESC LIMIT 50", args...)
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

// A database of a bot from before the repository id, the title and the
// schema's versions gains what it lacks on open; its receipts keep
// everything and get repository id 0, which no person's access matches
// (the operator's dashboard still shows them).
func TestStoreMigratesAnOldDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	// The schema as it was: no versions, no repo_id, no title.
	if _, err := s.db.Exec(`DROP TABLE runs; DROP TABLE schema_migrations; DROP TABLE transcripts; DROP TABLE transcript_lines; DROP TABLE run_days; DROP TABLE budget_entries; DROP TABLE budget_limits; DROP TABLE usage_days;
		CREATE TABLE runs (task_id TEXT PRIMARY KEY, repo TEXT NOT NULL, installation_id INTEGER NOT NULL,
		number INTEGER NOT NULL, issue INTEGER NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL, branch TEXT NOT NULL,
		url TEXT NOT NULL, cost_usd REAL NOT NULL, duration_s REAL NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,
		steps INTEGER NOT NULL, error TEXT NOT NULL, ended_at INTEGER NOT NULL);
		INSERT INTO runs VALUES ('T-0000000A', 'o/a', 1, 1, 1, 'plan', 'completed', 1, '', '', 0.5, 10, 1, 1, 1, '', 1000);`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openSQLite(t, dir)
	ctx := context.Background()
	all, err := s.List(ctx, Filter{}, 0, 10)
	if err != nil || all.Total != 1 || all.Runs[0].RepoID != 0 || all.Runs[0].CostUSD != 0.5 {
		t.Fatalf("the old receipt after the migration: %+v %v", all, err)
	}
	if p, _ := s.List(ctx, Filter{RepoIDs: []int64{1, 101}}, 0, 10); p.Total != 0 {
		t.Error("a person's access sees the receipt without an id")
	}
	if all.Runs[0].CostUnknown || all.Runs[0].Requester != "" || all.Runs[0].Model != "" {
		t.Errorf("the old receipt's cost is known ($0.50), and it names no requester or model: %+v", all.Runs[0])
	}
	if st, err := s.Stats(ctx, Filter{}); err != nil || st.Runs != 1 || st.CostUSD != 0.5 || len(st.Series) != 1 {
		t.Errorf("the old receipt in the figures: %+v %v", st, err)
	}
	if _, err := s.Append(ctx, "T-0000000A", []Line{{Seq: 1, Data: []byte(`{}`)}}); err != nil {
		t.Errorf("the migrated database keeps no transcript: %v", err)
	}
}

// A database a newer bot wrote (a schema version this one does not know)
// is refused with both versions named, not guessed at.
func TestStoreRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', ?)`, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := OpenSQLite(dir)
	if err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "up to 5") {
		t.Errorf("opening a database at version 99: %v; want a refusal naming 99 and 5", err)
	}
}
