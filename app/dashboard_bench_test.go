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
	b.Run("sqlite-100k", func(b *testing.B) { benchDashboard(b, newDashFixture(b), n) })
	b.Run("postgres-100k", func(b *testing.B) { benchDashboard(b, newDashFixtureOn(b, testenv.Postgres(b)), n) })
}

func benchDashboard(b *testing.B, f *dashFixture, n int) {
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
	get("/dashboard")
	get("/dashboard/style.css")
	load := testenv.LoadAverage()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, d := get("/dashboard")
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
	b.Logf("%d receipts: first byte p95 %.1f ms (goal ≤ 50), whole page p95 %.1f ms (goal ≤ 500), the stylesheet p50 %.2f ms; load average %s → %s",
		n, ms(pct(dashFirst, 95)), ms(pct(dashFull, 95)), ms(pct(staticFull, 50)), load, testenv.LoadAverage())
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// seedReceipts stores n receipts over a year, across the fixture's
// repositories, modes and statuses.
func seedReceipts(tb testing.TB, f *dashFixture, n int) {
	tb.Helper()
	repos := []string{"octo/alpha", "octo/beta", "other/gamma"}
	modes := []string{"plan", "execute", "revise", "rebase", "continue", "task"}
	statuses := []string{"completed", "completed", "completed", "failed", "timeout", "interrupted", "budget_exceeded", "hung"}
	runs := make([]receipts.Run, n)
	for i := range runs {
		repo := repos[i%len(repos)]
		runs[i] = receipts.Run{TaskID: fmt.Sprintf("T-%08X", 0x10000000+i), Repo: repo, RepoID: f.ids[repo], InstallationID: 1, Number: 1 + i%500, Issue: 1 + i%500,
			Mode: modes[i%len(modes)], Status: statuses[i%len(statuses)], Attempt: 1, URL: fmt.Sprintf("https://github.com/%s/issues/%d", repo, 1+i%500),
			CostUSD: float64(i%997) / 100, DurationSeconds: float64(30 + i%3600), Steps: i % 40, InputTokens: int64(i * 10), OutputTokens: int64(i),
			EndedAt: dashDay.Add(-time.Duration(i) * 365 * 24 * time.Hour / time.Duration(n))}
	}
	st := f.store()
	defer st.Close()
	if err := st.PutMany(tb.Context(), runs); err != nil {
		tb.Fatal(err)
	}
}
