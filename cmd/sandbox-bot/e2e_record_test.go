package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A run's record outlives its sandbox: after the run, its page on any
// replica sharing the store shows every line it showed live, numbered the
// same, and the receipt; its transcript downloads whole; every replica's
// dashboard lists it.

// pageLine is one line as a run's page shows it: its number in the run's
// log, its stage and its text (the time included, rendered alike by one
// browser).
type pageLine struct {
	Seq   int
	Stage string
	Text  string
}

func pageLines(t *testing.T, tab context.Context) []pageLine {
	t.Helper()
	lines, err := evaluate[[]pageLine](tab, `Array.from(document.querySelectorAll('li.step')).map(li =>
		({Seq: +li.dataset.seq, Stage: li.closest('li.stage').dataset.stage, Text: li.textContent}))`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// wholeAndOnce fails unless the lines are numbered 1, 2, ... n: each once,
// in order, none missing.
func wholeAndOnce(t *testing.T, what string, seqs []int) {
	t.Helper()
	if len(seqs) == 0 {
		t.Fatalf("%s: no lines", what)
	}
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("%s: line %d is numbered %d (lines %v); want 1..%d, each once, in order", what, i+1, s, seqs, len(seqs))
		}
	}
}

func seqsOf(lines []pageLine) []int {
	var out []int
	for _, l := range lines {
		out = append(out, l.Seq)
	}
	return out
}

// waitContainerGone waits until the docker backend has removed the run's
// sandbox (the bot cleans up once the result is posted).
func (l *loop) waitContainerGone(task string) {
	l.t.Helper()
	l.gh.WaitFor(time.Minute, "the sandbox of "+task+" removed", func() bool {
		out, err := exec.Command("docker", "ps", "-a", "-q", "--filter", "label=org.sandbox-bot.task="+task).Output()
		return err == nil && strings.TrimSpace(string(out)) == ""
	})
}

// recordOnReplica has tab, signed in on the bots' host already (replicas
// behind one name share the session cookie), open the ended run's page on
// the replica at addr: it must show want, line for line, and the receipt;
// the run's transcript from there must hold the same lines once each; and
// the replica's dashboard must list the run.
func (l *loop) recordOnReplica(tab context.Context, addr, task string, want []pageLine) {
	t := l.t
	t.Helper()
	base := "http://" + addr
	if st := l.signedIn(tab, "alice", base+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("the ended run's page on the other replica answers %d", st)
	}
	waitJS(t, tab, "the ended run's lines and receipt on the other replica", fmt.Sprintf(`document.querySelectorAll('li.step').length >= %d &&
		!document.getElementById('receipt').hidden && document.getElementById('r-status').textContent === 'completed' &&
		document.getElementById('state').textContent === 'ended'`, len(want)), time.Minute)
	got := pageLines(t, tab)
	if len(got) != len(want) {
		t.Fatalf("the other replica's page shows %d lines, the page watched live %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d on the other replica: %+v; live it was %+v", i+1, got[i], want[i])
		}
	}
	if title, _ := evaluate[string](tab, `document.getElementById('title') ? document.getElementById('title').textContent : ''`, 5*time.Second); title == "" {
		t.Error("the run's page does not name its issue by its title")
	}
	fetch, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	ndjson, err := settled(fetch, chromedp.Evaluate[string](`fetch('/runs/`+task+`/transcript').then(r => r.text().then(b => r.status + ' ' + r.headers.get('X-Transcript') + '\n' + b))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(ndjson, "\n")
	if head != "200 whole" {
		t.Fatalf("the transcript from the other replica: %s", head)
	}
	var seqs []int
	for i, line := range strings.Split(strings.TrimSpace(body), "\n") {
		var ev struct {
			Seq   int    `json:"seq"`
			Stage string `json:"stage"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("transcript line %d %q: %v", i+1, line, err)
		}
		if i < len(want) && ev.Stage != want[i].Stage {
			t.Errorf("transcript line %d is in stage %s; live it was in %s", i+1, ev.Stage, want[i].Stage)
		}
		seqs = append(seqs, ev.Seq)
	}
	wholeAndOnce(t, "the stored transcript", seqs)
	t.Logf("the run's transcript: %d lines, %d bytes of NDJSON (%.0f a line)", len(seqs), len(body), float64(len(body))/float64(len(seqs)))
	if len(seqs) != len(want) {
		t.Errorf("the stored transcript has %d lines, the page watched live %d", len(seqs), len(want))
	}
	if st := l.signedIn(tab, "alice", base+"/dashboard"); st != http.StatusOK {
		t.Fatalf("the other replica's dashboard answers %d", st)
	}
	waitJS(t, tab, "the run on the other replica's dashboard", `!!document.querySelector('a[href="/runs/`+task+`"]')`, 30*time.Second)
}
