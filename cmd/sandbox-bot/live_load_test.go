package main

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestLiveLatency (hand-run: SANDBOX_LIVELOAD=1) measures how long a
// progress line takes from the runner to the open live page, beside the
// same line's arrival at the bot (the floor), on the docker backend with
// the real image: the agent is a command that prints a line every 50 ms,
// each a progress line of the runner; Chromium holds the page open.
func TestLiveLatency(t *testing.T) {
	if os.Getenv("SANDBOX_LIVELOAD") != "1" {
		t.Skip("hand-run load test: SANDBOX_LIVELOAD=1")
	}
	const lines = 400
	yml := fmt.Sprintf("command: 'i=0; while [ $i -lt %d ]; do i=$((i+1)); echo \"line $i\"; sleep 0.05; done'\n", lines)
	l := startLoop(t, loopOptions{signIn: true, harness: "command", model: "none", sandboxYML: yml})
	_, tab := liveBrowser(t)
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Talk", "Print lines.")
	l.label(n)
	l.waitComment(n, "Planning this issue", 30*time.Second)
	task := l.ackedTask(n)
	page := tab()
	if st := l.signedIn(page, "alice", "http://"+l.addr+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("live page: %d", st)
	}
	waitJS(t, page, "the run's end on the page", `document.getElementById('state').textContent === 'ended'`, 5*time.Minute)
	type sample struct{ Wrote, Read, Page float64 }
	got, err := chromedp.Run(page, chromedp.Evaluate[[]sample](`Object.keys(window.liveTimes).filter(k => window.liveTimes[k][1] / 1000 > window.liveOpened)
	  .map(k => ({Wrote: window.liveTimes[k][0] / 1000, Read: window.liveTimes[k][1] / 1000, Page: window.liveArrivals[k]}))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < lines/2 {
		t.Fatalf("only %d lines arrived live (the page opened late?)", len(got))
	}
	var bot, pageMs []float64
	for _, s := range got {
		bot, pageMs = append(bot, s.Read-s.Wrote), append(pageMs, s.Page-s.Wrote)
	}
	pct := func(v []float64, p float64) float64 {
		slices.Sort(v)
		return v[min(len(v)-1, int(p*float64(len(v))))]
	}
	t.Logf("%d lines live: runner → bot p50 %.1f ms p99 %.1f ms (floor); runner → open page p50 %.1f ms p99 %.1f ms (goal ≤ 500); page - bot p99 %.1f ms",
		len(got), pct(bot, 0.5), pct(bot, 0.99), pct(pageMs, 0.5), pct(pageMs, 0.99), pct(pageMs, 0.99)-pct(bot, 0.99))
}
