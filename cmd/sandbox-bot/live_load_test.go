package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestLiveLatency (hand-run: SANDBOX_LIVELOAD=1) measures how long a
// progress line takes from the runner to the open live page, beside the
// same line's arrival at the bot (the floor), on the docker backend with
// the real image: the agent is a command that prints a line every 50 ms,
// each a progress line of the runner; Chromium holds the page open. The
// bot runs alternately without transcripts (SANDBOX_TRANSCRIPT_RETENTION=off,
// the bot before they were kept), keeping them in SQLite, and keeping them
// in PostgreSQL, two runs each; the load average is printed beside each.
func TestLiveLatency(t *testing.T) {
	testenv.HandRun(t, "SANDBOX_LIVELOAD", "go test -count=1 -run TestLiveLatency -v ./cmd/sandbox-bot/")
	const lines = 400
	yml := fmt.Sprintf("command: 'i=0; while [ $i -lt %d ]; do i=$((i+1)); echo \"line $i\"; sleep 0.05; done'\n", lines)
	l := startLoop(t, loopOptions{signIn: true, harness: "command", model: "none", sandboxYML: yml})
	pg := "SANDBOX_DATABASE_URL=" + testenv.Postgres(t)
	_, tab := liveBrowser(t)
	variants := []struct {
		name string
		env  []string
	}{
		{"no transcripts", []string{"SANDBOX_TRANSCRIPT_RETENTION=off"}},
		{"transcripts in SQLite", nil},
		{"transcripts in PostgreSQL", []string{pg}},
	}
	for round := range 2 {
		for _, v := range variants {
			_ = l.bot.cmd.Process.Signal(syscall.SIGTERM)
			<-l.bot.done
			l.bot = l.startBotAt(l.addr, v.env...)
			load := testenv.LoadAverage()
			bot, page := liveRun(t, l, tab(), lines)
			t.Logf("round %d, %s: %d lines live: runner → bot p50 %.1f ms p99 %.1f ms (floor); runner → open page p50 %.1f ms p99 %.1f ms (goal ≤ 500); load average %s → %s",
				round+1, v.name, len(bot), pctMs(bot, 0.5), pctMs(bot, 0.99), pctMs(page, 0.5), pctMs(page, 0.99), load, testenv.LoadAverage())
		}
	}
}

// liveRun starts one run, watches it on page from its start and returns
// each live line's runner → bot and runner → page times, in ms.
func liveRun(t *testing.T, l *loop, page context.Context, lines int) (bot, onPage []float64) {
	t.Helper()
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Talk", "Print lines.")
	l.label(n)
	l.waitComment(n, "Planning this issue", 30*time.Second)
	task := l.ackedTask(n)
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
	for _, s := range got {
		bot, onPage = append(bot, s.Read-s.Wrote), append(onPage, s.Page-s.Wrote)
	}
	return bot, onPage
}

func pctMs(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
