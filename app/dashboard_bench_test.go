package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkDashboard measures /dashboard for a signed-in person with
// 100,000 receipts stored, in SQLite (one machine's store) and in
// PostgreSQL (the replicas' shared store), each beside the dashboard's
// static stylesheet served by the same server over the same connection,
// alternating: time to first byte and to the last byte of each (the head
// of the page is flushed before the figures are read, so the first byte
// does not wait for them), medians and p95, and the ratio; the load
// average is printed beside them.
//
//	go test -run '^$' -bench Dashboard -benchtime 200x ./app
func BenchmarkDashboard(b *testing.B) {
	const n = 100000
	b.Run("sqlite-100k", func(b *testing.B) { benchPage(b, newDashFixture(b), n, "/dashboard") })
	b.Run("postgres-100k", func(b *testing.B) { benchPage(b, newDashFixtureOn(b, testenv.Postgres(b)), n, "/dashboard") })
}

// BenchmarkUsagePage is BenchmarkDashboard for the usage page of April
// 2026 (a whole month of about 8,300 of the receipts; its year chart
// reads nearly all of them), with budgets on.
//
//	go test -run '^$' -bench UsagePage -benchtime 200x ./app
func BenchmarkUsagePage(b *testing.B) {
	const n = 100000
	budgets := map[string]string{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD": "1000", "SANDBOX_BUDGET_REPO_MONTHLY_USD": "400"}
	b.Run("sqlite-100k", func(b *testing.B) {
		f := newDashFixture(b)
		f.env = budgets
		benchPage(b, f, n, "/dashboard/usage?month=2026-04")
	})
	b.Run("postgres-100k", func(b *testing.B) {
		f := newDashFixtureOn(b, testenv.Postgres(b))
		f.env = budgets
		benchPage(b, f, n, "/dashboard/usage?month=2026-04")
	})
}

// benchPage measures path beside the stylesheet, alternating.
func benchPage(b *testing.B, f *dashFixture, n int, path string) {
	seedReceipts(b, f, n)
	// As a bot finds a store that grew over months: restarted since, its
	// database's statistics current.
	f.start()
	client := f.signedInClient("alice")
	get := func(path string) (ttfb, full time.Duration) {
		var first time.Time
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(b.Context(), &httptrace.ClientTrace{
			GotFirstResponseByte: func() { first = time.Now() },
		}), http.MethodGet, f.http.URL+path, nil)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("GET %s: %d, %d bytes", path, resp.StatusCode, n)
		}
		return first.Sub(start), time.Since(start)
	}
	var dashFirst, dashFull, staticFirst, staticFull []time.Duration
	get(path)
	get("/dashboard/style.css")
	load := testenv.LoadAverage()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, d := get(path)
		dashFirst, dashFull = append(dashFirst, t), append(dashFull, d)
		t, d = get("/dashboard/style.css")
		staticFirst, staticFull = append(staticFirst, t), append(staticFull, d)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(dashFirst, 50)), "dash-ttfb-p50-ms")
	b.ReportMetric(ms(pct(dashFirst, 95)), "dash-ttfb-p95-ms")
	b.ReportMetric(ms(pct(dashFull, 50)), "dash-full-p50-ms")
	b.ReportMetric(ms(pct(dashFull, 95)), "dash-full-p95-ms")
	b.ReportMetric(ms(pct(staticFirst, 50)), "static-ttfb-p50-ms")
	b.ReportMetric(ms(pct(staticFull, 50)), "static-full-p50-ms")
	b.ReportMetric(float64(pct(dashFirst, 50))/float64(pct(staticFirst, 50)), "ttfb-x-static")
	b.ReportMetric(float64(pct(dashFull, 50))/float64(pct(staticFull, 50)), "full-x-static")
	b.ReportMetric(0, "ns/op")
	b.Logf("%s, %d receipts: first byte p95 %.1f ms (goal ≤ 50), whole page p95 %.1f ms (goal ≤ 500), the stylesheet p50 %.2f ms; load average %s → %s",
		path, n, ms(pct(dashFirst, 95)), ms(pct(dashFull, 95)), ms(pct(staticFull, 50)), load, testenv.LoadAverage())
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// seedReceipts stores n receipts over the year to dashDay, across the
// fixture's repositories, modes, statuses, people and models; one in 50
// of unknown cost. (The spread is computed in floating point: i times a
// year in nanoseconds overflows an int64 past i = 292.)
func seedReceipts(tb testing.TB, f *dashFixture, n int) {
	tb.Helper()
	repos := []string{"octo/alpha", "octo/beta", "other/gamma"}
	modes := []string{"plan", "execute", "revise", "rebase", "continue", "task"}
	people := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", ""}
	models := []string{"anthropic/claude-sonnet-4-5", "openai/gpt-5", ""}
	statuses := []string{"completed", "completed", "completed", "failed", "timeout", "interrupted", "budget_exceeded", "hung"}
	runs := make([]receipts.Run, n)
	for i := range runs {
		repo := repos[i%len(repos)]
		runs[i] = receipts.Run{TaskID: fmt.Sprintf("T-%08X", 0x10000000+i), Repo: repo, RepoID: f.ids[repo], InstallationID: 1, Number: 1 + i%500, Issue: 1 + i%500,
			Mode: modes[i%len(modes)], Status: statuses[i%len(statuses)], Attempt: 1, URL: fmt.Sprintf("https://github.com/%s/issues/%d", repo, 1+i%500),
			CostUSD: float64(i%997) / 100, DurationSeconds: float64(30 + i%3600), Steps: i % 40, InputTokens: int64(i * 10), OutputTokens: int64(i),
			EndedAt:   dashDay.Add(-time.Duration(float64(i) / float64(n) * float64(365*24*time.Hour))),
			Requester: people[i%len(people)], Model: models[i%len(models)], CostUnknown: i%50 == 0}
	}
	st := f.store()
	defer st.Close()
	if err := st.PutMany(tb.Context(), runs); err != nil {
		tb.Fatal(err)
	}
}
