package receiptstest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// usage: the usage page's sums are the receipts' own, to the cent with
// many small costs, by the buckets asked for (days of a month in a zone
// with summer time, months of a year), by repository, installation,
// requester, model and mode in detail; runs of unknown cost are counted
// apart and add nothing; a reader's access narrows them.
func usage(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	// March 2026 in Berlin: 31 days, one of 23 hours (the 29th).
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, berlin)
	var days []time.Time
	for d := start; !d.After(start.AddDate(0, 1, 0)); d = d.AddDate(0, 0, 1) {
		days = append(days, d)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var runs []receipts.Run
	want := map[string]*receipts.UsageRow{} // by day|repo|requester|model|mode
	wantMicros := int64(0)
	wantUnknown := 0
	for i := range 400 {
		d := rng.IntN(31)
		// Any moment of the day, its first and last millisecond included.
		span := days[d+1].Sub(days[d]).Milliseconds()
		at := days[d].Add(time.Duration(rng.Int64N(span)) * time.Millisecond)
		switch i {
		case 0:
			at = days[d]
		case 1:
			at = days[d+1].Add(-time.Millisecond)
		}
		repo := []string{"o/a", "o/b", "p/c"}[rng.IntN(3)]
		r := receipts.Run{TaskID: fmt.Sprintf("T-%08X", 0xA000+i), Repo: repo, RepoID: int64(100 + repo[2] - 'a' + 1), InstallationID: 7,
			Mode: []string{"plan", "execute", "revise", "task"}[rng.IntN(4)], Status: "completed", EndedAt: at.UTC(),
			Requester: []string{"alice", "bob", ""}[rng.IntN(3)], Model: []string{"m/one", "m/two"}[rng.IntN(2)],
			// Costs of a few cents with six decimals: float sums drift.
			CostUSD:     float64(rng.IntN(99999)+1) / 1e6 * 10,
			InputTokens: int64(rng.IntN(5000)), OutputTokens: int64(rng.IntN(500)),
		}
		if repo == "p/c" {
			r.InstallationID = 8
		}
		if i%9 == 0 {
			r.CostUSD, r.CostUnknown = 0, true
		}
		runs = append(runs, r)
		key := strconv.Itoa(d) + "|" + r.Repo + "|" + r.Requester + "|" + r.Model + "|" + r.Mode
		w := want[key]
		if w == nil {
			w = &receipts.UsageRow{Bucket: d, Repo: r.Repo, InstallationID: r.InstallationID, Requester: r.Requester, Model: r.Model, Mode: r.Mode}
			want[key] = w
		}
		w.Runs++
		w.InputTokens += r.InputTokens
		w.OutputTokens += r.OutputTokens
		if r.CostUnknown {
			w.Unknown++
			wantUnknown++
		} else {
			w.CostMicros += int64(math.Round(r.CostUSD * 1e6))
			wantMicros += int64(math.Round(r.CostUSD * 1e6))
		}
	}
	// Outside the month by a millisecond each side: not counted.
	runs = append(runs, receipts.Run{TaskID: "T-0000AFFE", Repo: "o/a", RepoID: 101, Mode: "plan", Status: "completed", CostUSD: 5, EndedAt: start.Add(-time.Millisecond)},
		receipts.Run{TaskID: "T-0000AFFF", Repo: "o/a", RepoID: 101, Mode: "plan", Status: "completed", CostUSD: 7, EndedAt: days[31]})
	if err := s.PutMany(ctx, runs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Usage(ctx, receipts.Filter{}, days, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Errorf("%d detail rows, want %d", len(rows), len(want))
	}
	gotMicros, gotUnknown := int64(0), 0
	for _, r := range rows {
		key := strconv.Itoa(r.Bucket) + "|" + r.Repo + "|" + r.Requester + "|" + r.Model + "|" + r.Mode
		if w := want[key]; w == nil || *w != r {
			t.Errorf("row %s: %+v, want %+v", key, r, w)
		}
		gotMicros += r.CostMicros
		gotUnknown += r.Unknown
	}
	if gotMicros != wantMicros || gotUnknown != wantUnknown {
		t.Errorf("the month: %d micro-dollars and %d of unknown cost, want %d and %d", gotMicros, gotUnknown, wantMicros, wantUnknown)
	}
	// The year's months: March holds the month, February and April one
	// receipt each.
	var months []time.Time
	for i := -11; i <= 1; i++ {
		months = append(months, start.AddDate(0, i, 0))
	}
	months = append(months, start.AddDate(0, 2, 0))
	year, err := s.Usage(ctx, receipts.Filter{}, months, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(year) != 3 || year[0].Bucket != 10 || year[0].CostMicros != 5e6 || year[1].Bucket != 11 || year[1].CostMicros != wantMicros ||
		year[1].Runs != 400 || year[1].Unknown != wantUnknown || year[2].Bucket != 12 || year[2].CostMicros != 7e6 {
		t.Errorf("the year: %+v; want February $5, March %d micro-dollars in 400 runs, April $7", year, wantMicros)
	}
	sameUsage(t, s, months)
	// A receipt replaced (a result read again) moves its figures.
	again := runs[10]
	again.CostUSD, again.CostUnknown = 1.234567, false
	if err := s.Put(ctx, again); err != nil {
		t.Fatal(err)
	}
	var utc []time.Time
	for i := -11; i <= 2; i++ {
		utc = append(utc, time.Date(2026, 3+time.Month(i), 1, 0, 0, 0, 0, time.UTC))
	}
	sameUsage(t, s, months)
	sameUsage(t, s, utc)
	// March's UTC days (buckets of one width) add up to March.
	var utcDays []time.Time
	for d := utc[11]; !d.After(utc[12]); d = d.AddDate(0, 0, 1) {
		utcDays = append(utcDays, d)
	}
	perDay, err := s.Usage(ctx, receipts.Filter{}, utcDays, true)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := s.Usage(ctx, receipts.Filter{}, []time.Time{utc[11], utc[12]}, false)
	if err != nil || len(whole) != 1 {
		t.Fatalf("March in UTC: %+v %v", whole, err)
	}
	var m int64
	n := 0
	for _, r := range perDay {
		if r.Bucket < 0 || r.Bucket >= len(utcDays)-1 {
			t.Errorf("row %+v is of no day of March", r)
		}
		m += r.CostMicros
		n += r.Runs
	}
	if m != whole[0].CostMicros || n != whole[0].Runs {
		t.Errorf("March's UTC days: %d runs, %d micro-dollars; March: %+v", n, m, whole[0])
	}
	// A reader of o/b alone sees o/b alone.
	only, err := s.Usage(ctx, receipts.Filter{RepoIDs: []int64{102}}, days, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range only {
		if r.Repo != "o/b" {
			t.Errorf("a reader of o/b sees %+v", r)
		}
	}
	if none, err := s.Usage(ctx, receipts.Filter{RepoIDs: []int64{}}, days, true); err != nil || len(none) != 0 {
		t.Errorf("a reader of nothing: %+v %v", none, err)
	}
	if _, err := s.Usage(ctx, receipts.Filter{}, days[:1], true); err == nil {
		t.Error("a usage query of one bound was answered")
	}
	limits(t, s)
}

// limits: an admission's budgets replace the repository's earlier ones,
// matched in any case.
func limits(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	for _, l := range []receipts.Limits{
		{InstallationID: 7, Repo: "O/A", InstallationUSD: 500, RepoUSD: 50, UpdatedAt: day0},
		{InstallationID: 7, Repo: "o/a", InstallationUSD: 400, RepoUSD: 20, UpdatedAt: day0.Add(day)},
		{InstallationID: 7, Repo: "o/b", InstallationUSD: 500, UpdatedAt: day0},
	} {
		if err := s.KeepLimits(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Limits(ctx, []string{"o/A", "x/y"})
	if err != nil || len(got) != 1 || got[0].Repo != "o/a" || got[0].RepoUSD != 20 || got[0].InstallationUSD != 400 || !got[0].UpdatedAt.Equal(day0.Add(day)) {
		t.Errorf("the budgets of o/a: %+v %v; want the later admission's $400 and $20", got, err)
	}
	if none, err := s.Limits(ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("the budgets of no repository: %+v %v", none, err)
	}
}

// sameUsage: a year's months read from the day table (and the receipts
// of the days a bound cuts) are the receipts' own sums by month.
func sameUsage(t *testing.T, s receipts.Store, months []time.Time) {
	t.Helper()
	ctx := context.Background()
	year, err := s.Usage(ctx, receipts.Filter{}, months, false)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := s.Usage(ctx, receipts.Filter{}, months, true)
	if err != nil {
		t.Fatal(err)
	}
	by := map[int]receipts.UsageRow{}
	for _, r := range exact {
		m := by[r.Bucket]
		m.Bucket = r.Bucket
		m.Add(r)
		by[r.Bucket] = m
	}
	if len(year) != len(by) {
		t.Errorf("months from %s: %d from the day table, %d from the receipts", months[0], len(year), len(by))
	}
	for _, r := range year {
		if by[r.Bucket] != r {
			t.Errorf("month %d from %s: %+v from the day table, %+v from the receipts", r.Bucket, months[0], r, by[r.Bucket])
		}
	}
}
