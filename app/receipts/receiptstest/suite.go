// Package receiptstest holds every receipts.Store to one contract, in the
// way testing/fstest holds a file system: the SQLite store and the
// PostgreSQL store run the same suite, so the dashboard and the runs'
// pages cannot tell which one they read.
package receiptstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// Opener opens a store on one database; each call opens the same
// database again (another replica, or the bot after a restart).
type Opener func() (receipts.Store, error)

// Run runs the contract. fresh makes a new, empty database and returns
// its Opener; the stores it opens are closed when t ends.
func Run(t *testing.T, fresh func(t *testing.T) Opener) {
	open := func(t *testing.T) receipts.Store {
		t.Helper()
		s, err := fresh(t)()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("KeepsReceiptsAcrossReopen", func(t *testing.T) { t.Parallel(); keepsAcrossReopen(t, fresh(t)) })
	t.Run("FiltersAndPages", func(t *testing.T) { t.Parallel(); filtersAndPages(t, open(t)) })
	t.Run("Stats", func(t *testing.T) { t.Parallel(); stats(t, open(t)) })
	t.Run("PutReplacesImportKeeps", func(t *testing.T) { t.Parallel(); putReplacesImportKeeps(t, open(t)) })
	t.Run("TranscriptLinesOnceInOrder", func(t *testing.T) { t.Parallel(); linesOnceInOrder(t, open(t)) })
	t.Run("TranscriptHead", func(t *testing.T) { t.Parallel(); transcriptHead(t, open(t)) })
	t.Run("PruneKeepsReceipts", func(t *testing.T) { t.Parallel(); pruneKeepsReceipts(t, open(t)) })
	t.Run("CopyTwiceCopiesOnce", func(t *testing.T) { t.Parallel(); copyTwice(t, open(t), open(t)) })
	t.Run("Usage", func(t *testing.T) { t.Parallel(); usage(t, open(t)) })
	t.Run("ReplicasStartAtOnce", func(t *testing.T) { t.Parallel(); replicasAtOnce(t, fresh(t)) })
}

const day = 24 * time.Hour

var day0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Seed keeps five receipts over four days in two repositories (o/a is
// repository 101, o/b 102) and returns them.
func Seed(t testing.TB, s receipts.Store) []receipts.Run {
	t.Helper()
	runs := []receipts.Run{
		{TaskID: "T-00000001", Repo: "o/a", Mode: "execute", Status: "completed", CostUSD: 1.5, DurationSeconds: 60, EndedAt: day0, Title: "Add <b>caching</b>"},
		{TaskID: "T-00000002", Repo: "o/a", Mode: "execute", Status: "failed", CostUSD: 0.5, DurationSeconds: 30, EndedAt: day0.Add(day), Error: "tests failed"},
		{TaskID: "T-00000003", Repo: "o/a", Mode: "plan", Status: "completed", CostUSD: 0.25, DurationSeconds: 20, EndedAt: day0.Add(day)},
		{TaskID: "T-00000004", Repo: "o/b", Mode: "revise", Status: "timeout", CostUSD: 3, DurationSeconds: 600, EndedAt: day0.Add(3 * day), Branch: "agent/x"},
		{TaskID: "T-00000005", Repo: "o/b", Mode: "revise", Status: "failed", CostUSD: 0.1, DurationSeconds: 5, EndedAt: day0.Add(3 * day)},
	}
	for i := range runs {
		runs[i].RepoID = 100 + int64(runs[i].Repo[2]-'a'+1)
		runs[i].URL = fmt.Sprintf("https://github.example/%s/issues/%d", runs[i].Repo, i+1)
		runs[i].Number, runs[i].Issue, runs[i].Attempt = i+1, i+1, 1
		runs[i].InstallationID, runs[i].InputTokens, runs[i].OutputTokens, runs[i].Steps = 7, int64(1000*i), int64(10*i), i
	}
	if err := s.PutMany(context.Background(), runs); err != nil {
		t.Fatal(err)
	}
	return runs
}

func all(t *testing.T, s receipts.Store) map[string]receipts.Run {
	t.Helper()
	p, err := s.List(context.Background(), receipts.Filter{}, 0, receipts.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]receipts.Run{}
	for _, r := range p.Runs {
		got[r.TaskID] = r
	}
	return got
}

func keepsAcrossReopen(t *testing.T, open Opener) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	want := Seed(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := all(t, s)
	if len(got) != len(want) {
		t.Fatalf("after reopening: %d runs, want %d", len(got), len(want))
	}
	for _, w := range want {
		if got[w.TaskID] != w {
			t.Errorf("after reopening %s = %+v, want %+v", w.TaskID, got[w.TaskID], w)
		}
	}
}

func filtersAndPages(t *testing.T, s receipts.Store) {
	Seed(t, s)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    receipts.Filter
		want int
	}{
		{"all", receipts.Filter{}, 5},
		{"repo", receipts.Filter{Repo: "o/a"}, 3},
		{"mode", receipts.Filter{Mode: "revise"}, 2},
		{"status", receipts.Filter{Status: "failed"}, 2},
		{"date range", receipts.Filter{From: day0.Add(day).Truncate(day), To: day0.Add(2 * day)}, 2},
		{"access to o/b only", receipts.Filter{RepoIDs: []int64{102}}, 2},
		{"access to o/b, asking for o/a", receipts.Filter{RepoIDs: []int64{102}, Repo: "o/a"}, 0},
		{"no access", receipts.Filter{RepoIDs: []int64{}}, 0},
		{"task", receipts.Filter{TaskID: "T-00000004"}, 1},
	} {
		p, err := s.List(ctx, c.f, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if p.Total != c.want || len(p.Runs) != c.want {
			t.Errorf("%s: %d runs (total %d), want %d", c.name, len(p.Runs), p.Total, c.want)
		}
	}
	p, err := s.List(ctx, receipts.Filter{}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 5 || len(p.Runs) != 2 || p.Runs[0].TaskID != "T-00000002" || p.Runs[1].TaskID != "T-00000003" {
		t.Errorf("second page of two: total %d, runs %+v; want T-00000002, T-00000003 (newest first, then by task id)", p.Total, p.Runs)
	}
	repos, err := s.Repos(ctx, receipts.Filter{RepoIDs: []int64{102}, Repo: "o/a"})
	if err != nil || !slices.Equal(repos, []string{"o/b"}) {
		t.Errorf("repositories o/b's reader may choose from: %v %v; want [o/b] (the other filters ignored)", repos, err)
	}
}

func stats(t *testing.T, s receipts.Store) {
	Seed(t, s)
	st, err := s.Stats(context.Background(), receipts.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 5 || st.Succeeded != 2 || st.CostUSD != 5.35 {
		t.Errorf("totals: %d runs, %d succeeded, $%v; want 5, 2, $5.35", st.Runs, st.Succeeded, st.CostUSD)
	}
	if len(st.Groups) != 3 || st.Groups[0].Repo != "o/a" || st.Groups[0].Mode != "execute" || st.Groups[0].SuccessRate() != 0.5 {
		t.Errorf("groups: %+v; want o/a execute at 50%% first of 3", st.Groups)
	}
	if len(st.Failures) != 2 || st.Failures[0] != (receipts.StatusCount{Status: "failed", Runs: 2}) || st.Failures[1] != (receipts.StatusCount{Status: "timeout", Runs: 1}) {
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
	none, err := s.Stats(context.Background(), receipts.Filter{RepoIDs: []int64{}})
	if err != nil || none.Runs != 0 || len(none.Series) != 0 {
		t.Errorf("no access: %+v, %v; want no runs", none, err)
	}
	sameFigures(t, s)
}

// sameFigures: the figures of whole days (read from the day table) are
// those of the receipts themselves (read for a filter that is not whole
// days), to the last digit.
func sameFigures(t *testing.T, s receipts.Store) {
	t.Helper()
	ctx := context.Background()
	for _, f := range []receipts.Filter{{}, {Repo: "o/a"}, {RepoIDs: []int64{102}, Status: "failed"}, {From: day0.Truncate(day).Add(day), To: day0.Truncate(day).Add(3 * day)}} {
		byDay, err := s.Stats(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		exact := f
		exact.From, exact.To = f.From.Add(-time.Millisecond), f.To
		if f.To.IsZero() {
			exact.To = day0.Add(1000 * day).Add(time.Millisecond)
		}
		byRun, err := s.Stats(ctx, exact)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(byDay) != fmt.Sprint(byRun) {
			t.Errorf("filter %+v: the day table's figures\n%+v\ndiffer from the receipts'\n%+v", f, byDay, byRun)
		}
		p1, _ := s.List(ctx, f, 0, 100)
		p2, _ := s.List(ctx, exact, 0, 100)
		if p1.Total != p2.Total || p1.Total != byDay.Runs {
			t.Errorf("filter %+v: %d runs counted by day, %d by receipt, %d in the figures", f, p1.Total, p2.Total, byDay.Runs)
		}
	}
}

func putReplacesImportKeeps(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	runs := Seed(t, s)
	again := runs[0]
	again.Status, again.CostUSD = "failed", 9
	if err := s.Put(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got := all(t, s)[again.TaskID]; got != again {
		t.Errorf("Put of a kept task: %+v, want it replaced by %+v", got, again)
	}
	// The replaced receipt's figures went with it.
	if st, err := s.Stats(ctx, receipts.Filter{}); err != nil || st.Runs != 5 || st.Succeeded != 1 || st.CostUSD != 5.35-1.5+9 {
		t.Errorf("figures after the replacement: %d runs, %d completed, $%v (%v); want 5, 1, $%v", st.Runs, st.Succeeded, st.CostUSD, err, 5.35-1.5+9)
	}
	sameFigures(t, s)
	other := runs[1]
	other.Status = "completed"
	fresh := receipts.Run{TaskID: "T-0000000F", Repo: "o/c", Mode: "plan", Status: "completed", EndedAt: day0}
	added, err := s.Import(ctx, []receipts.Run{other, fresh})
	if err != nil || added != 1 {
		t.Fatalf("Import of one kept and one new receipt: %d added, %v; want 1", added, err)
	}
	got := all(t, s)
	if got[other.TaskID] != runs[1] || got[fresh.TaskID] != fresh {
		t.Errorf("after Import: %+v and %+v; want the kept one as it was and the new one", got[other.TaskID], got[fresh.TaskID])
	}
	if err := s.Put(ctx, receipts.Run{TaskID: "T-00000010"}); err == nil {
		t.Error("a receipt without its repository was kept")
	}
}

// lines makes n transcript lines from first.
func lines(first, n int) []receipts.Line {
	var out []receipts.Line
	for i := first; i < first+n; i++ {
		out = append(out, receipts.Line{Seq: i, Data: fmt.Appendf(nil, `{"seq":%d,"stage":"agent","message":"step %d ✓ <b>"}`, i, i)})
	}
	return out
}

func linesOnceInOrder(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	task := "T-0000A001"
	if err := s.Begin(ctx, receipts.Head{TaskID: task, Repo: "o/a", RepoID: 101, Mode: "plan", Number: 3}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Append(ctx, task, lines(1, 5)); err != nil || n != 5 {
		t.Fatalf("append 1-5: %d, %v", n, err)
	}
	// A restarted follower reads the log from its start again: 1-5 are
	// kept already, 6-8 are new.
	if n, err := s.Append(ctx, task, lines(1, 8)); err != nil || n != 3 {
		t.Fatalf("append 1-8 after 1-5: %d added, %v; want 3", n, err)
	}
	got, err := s.Lines(ctx, task, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := lines(1, 8)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("line %d: %d %s; want %d %s", i, got[i].Seq, got[i].Data, want[i].Seq, want[i].Data)
		}
	}
	// After Last-Event-ID 5, at most two.
	if got, err := s.Lines(ctx, task, 5, 2); err != nil || len(got) != 2 || got[0].Seq != 6 || got[1].Seq != 7 {
		t.Errorf("lines after 5, two: %+v %v; want 6 and 7", got, err)
	}
	if got, err := s.Lines(ctx, "T-0000A0FF", 0, 10); err != nil || len(got) != 0 {
		t.Errorf("lines of a run without a transcript: %+v %v", got, err)
	}
	if _, err := s.Append(ctx, task, []receipts.Line{{Seq: 0, Data: []byte("{}")}}); err == nil {
		t.Error("line 0 was kept; lines are numbered from 1")
	}
}

func transcriptHead(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	if _, err := s.Head(ctx, "T-0000B000"); err != receipts.ErrNoTranscript {
		t.Errorf("the head of no transcript: %v, want ErrNoTranscript", err)
	}
	task := "T-0000B001"
	before := time.Now().Add(-time.Second)
	h := receipts.Head{TaskID: task, Repo: "o/b", RepoID: 102, InstallationID: 7, Number: 12, Mode: "revise", Title: "Fix <script>"}
	if err := s.Begin(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, task, lines(1, 3)); err != nil {
		t.Fatal(err)
	}
	// A restarted follower that could not read the title keeps it.
	again := h
	again.Title = ""
	if err := s.Begin(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, err := s.Head(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != h.Title || got.Repo != "o/b" || got.RepoID != 102 || got.InstallationID != 7 || got.Number != 12 || got.Mode != "revise" ||
		got.Lines != 3 || got.Whole || got.StartedAt.Before(before.Truncate(time.Millisecond)) {
		t.Errorf("head: %+v; want %+v with 3 lines, not whole, started now", got, h)
	}
	if err := s.Finish(ctx, task); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Head(ctx, task); !got.Whole {
		t.Error("Finish did not make the transcript whole")
	}
	// Lines whose head was never kept get one.
	if _, err := s.Append(ctx, "T-0000B002", lines(1, 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Head(ctx, "T-0000B002"); err != nil || got.Lines != 1 {
		t.Errorf("head of lines kept without one: %+v %v", got, err)
	}
	heads, err := s.Heads(ctx, "T-0000B001", 10)
	if err != nil || len(heads) != 1 || heads[0].TaskID != "T-0000B002" {
		t.Errorf("heads after T-0000B001: %+v %v; want T-0000B002", heads, err)
	}
}

func pruneKeepsReceipts(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	runs := Seed(t, s)
	now := time.Now()
	old := receipts.Head{TaskID: runs[0].TaskID, Repo: "o/a", RepoID: 101, Mode: "execute", StartedAt: now.Add(-100 * day)}
	if err := s.ImportHead(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, old.TaskID, lines(1, 4)); err != nil {
		t.Fatal(err)
	}
	recent := runs[1].TaskID
	if err := s.Begin(ctx, receipts.Head{TaskID: recent, Repo: "o/a", RepoID: 101, Mode: "execute"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, recent, lines(1, 2)); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prune(ctx, now.Add(-90*day))
	if err != nil || p.Transcripts != 1 || p.Lines != 4 {
		t.Fatalf("prune before 90 days ago: %+v %v; want 1 transcript of 4 lines", p, err)
	}
	if _, err := s.Head(ctx, old.TaskID); err != receipts.ErrNoTranscript {
		t.Errorf("the old transcript's head after pruning: %v", err)
	}
	if l, _ := s.Lines(ctx, old.TaskID, 0, 10); len(l) != 0 {
		t.Errorf("the old transcript's lines after pruning: %d", len(l))
	}
	if h, err := s.Head(ctx, recent); err != nil || h.Lines != 2 {
		t.Errorf("the recent transcript after pruning: %+v %v", h, err)
	}
	if got := all(t, s); len(got) != len(runs) {
		t.Errorf("receipts after pruning: %d, want all %d kept", len(got), len(runs))
	}
}

func copyTwice(t *testing.T, from, to receipts.Store) {
	ctx := context.Background()
	runs := Seed(t, from)
	for i, task := range []string{runs[0].TaskID, runs[3].TaskID} {
		if err := from.Begin(ctx, receipts.Head{TaskID: task, Repo: "o/a", RepoID: 101, Mode: "execute", Title: "t"}); err != nil {
			t.Fatal(err)
		}
		if _, err := from.Append(ctx, task, lines(1, 3+i*receipts.MaxPageSize)); err != nil {
			t.Fatal(err)
		}
	}
	if err := from.Finish(ctx, runs[0].TaskID); err != nil {
		t.Fatal(err)
	}
	// The target's bot kept a receipt of its own already: it stays.
	mine := runs[2]
	mine.Status = "hung"
	if err := to.Put(ctx, mine); err != nil {
		t.Fatal(err)
	}
	first, err := receipts.Copy(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := 3 + 3 + receipts.MaxPageSize
	if first.Receipts != 4 || first.ReceiptsThere != 1 || first.Transcripts != 2 || first.Lines != wantLines {
		t.Errorf("first copy: %s; want 4 receipts (1 there), 2 transcripts, %d lines", first, wantLines)
	}
	second, err := receipts.Copy(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if second.Receipts != 0 || second.ReceiptsThere != 5 || second.Transcripts != 0 || second.Lines != 0 || second.LinesThere != wantLines {
		t.Errorf("second copy: %s; want nothing copied", second)
	}
	got := all(t, to)
	for _, r := range runs {
		want := r
		if r.TaskID == mine.TaskID {
			want = mine
		}
		if got[r.TaskID] != want {
			t.Errorf("copied %s = %+v, want %+v", r.TaskID, got[r.TaskID], want)
		}
	}
	for _, task := range []string{runs[0].TaskID, runs[3].TaskID} {
		src, _ := from.Lines(ctx, task, 0, 1000)
		dst, _ := to.Lines(ctx, task, 0, 1000)
		if len(dst) != len(src) {
			t.Errorf("%s: %d lines copied of %d", task, len(dst), len(src))
		}
		hs, _ := from.Head(ctx, task)
		hd, err := to.Head(ctx, task)
		if err != nil || hd.Whole != hs.Whole || hd.Title != hs.Title || !hd.StartedAt.Equal(hs.StartedAt) || hd.Lines != hs.Lines {
			t.Errorf("%s: copied head %+v %v, want %+v", task, hd, err, hs)
		}
	}
}

func replicasAtOnce(t *testing.T, open Opener) {
	const n = 4
	stores := make([]receipts.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); stores[i], errs[i] = open() }()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("replica %d of %d starting at once: %v", i+1, n, errs[i])
		}
		defer stores[i].Close()
	}
	ctx := context.Background()
	if err := stores[0].Put(ctx, receipts.Run{TaskID: "T-0000C001", Repo: "o/a", Mode: "plan", Status: "completed", EndedAt: day0}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].Append(ctx, "T-0000C001", lines(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[2].Append(ctx, "T-0000C001", lines(1, 3)); err != nil {
		t.Fatal(err)
	}
	if got := all(t, stores[n-1]); len(got) != 1 {
		t.Errorf("the last replica sees %d receipts, want the first's one", len(got))
	}
	if l, err := stores[n-1].Lines(ctx, "T-0000C001", 0, 10); err != nil || len(l) != 3 {
		t.Errorf("the last replica sees %d lines (%v), want 3 kept once", len(l), err)
	}
	// Every replica keeps the receipt of one run at once (two followers
	// of it): one receipt, and the figures are the kept one's.
	var writers sync.WaitGroup
	for i := range n {
		writers.Add(1)
		go func() {
			defer writers.Done()
			r := receipts.Run{TaskID: "T-0000C002", Repo: "o/a", Mode: "execute", Status: "completed", CostUSD: float64(i + 1), EndedAt: day0.Add(time.Duration(i) * day)}
			if err := stores[i].Put(ctx, r); err != nil {
				t.Error(err)
			}
		}()
	}
	writers.Wait()
	kept := all(t, stores[0])["T-0000C002"]
	st, err := stores[0].Stats(ctx, receipts.Filter{})
	if err != nil || st.Runs != 2 || st.CostUSD != kept.CostUSD || len(st.Series) == 0 {
		t.Errorf("figures after %d replicas kept one receipt at once: %d runs, $%v (%v); want 2 runs and the kept $%v", n, st.Runs, st.CostUSD, err, kept.CostUSD)
	}
	sameFigures(t, stores[0])
}
