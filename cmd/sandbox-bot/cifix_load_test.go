package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestCIFixStartLoad is issue 30's start figure, by hand:
//
//	SANDBOX_CIFIXLOAD=1 go test -count=1 -timeout 60m -run TestCIFixStartLoad -v ./cmd/sandbox-bot/
//
// Through the real bot on the docker backend, the real image and OpenCode
// on the scripted model, alternately (SANDBOX_CIFIXLOAD_ROUNDS rounds, 3 by
// default): a writer labels an issue (no plan step), label → the execute
// run's first model request (the floor); its PR's one check, an Actions
// job, fails, its suite's completion webhook → the fix run's first model
// request. Each
// round's pair and the means are printed with the load average; the goal
// is a ratio ≤ 1.2. The bytes of log each fix run was given are printed
// beside the log's size.
func TestCIFixStartLoad(t *testing.T) {
	testenv.HandRun(t, "SANDBOX_CIFIXLOAD", "go test -count=1 -timeout 60m -run TestCIFixStartLoad -v ./cmd/sandbox-bot/")
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("SANDBOX_CIFIXLOAD_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var script []modeltest.Turn
	for range rounds {
		script = append(script,
			modeltest.Turn{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hullo\n")}, Usage: usage(1000, 30)},
			modeltest.Turn{Text: "Added greet.txt.", Usage: usage(1100, 10)},
			modeltest.Turn{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hello\n")}, Usage: usage(1200, 30)},
			modeltest.Turn{Text: "Fixed the greeting.", Usage: usage(1300, 10)})
	}
	l := startLoop(t, loopOptions{script: script, sandboxYML: "plan: { required: false }\nci: { fix: true, fix_attempts: 1 }\n",
		files: map[string]string{"README.md": "# demo\n"}})
	var labels, fixes []time.Duration
	for i := range rounds {
		n := l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Greet people %d", i), "Create greet.txt saying hello.")
		served := len(l.model.ScriptedRequests())
		labelAt := time.Now()
		l.label(n)
		l.waitComment(n, "🚀 Opened", 10*time.Minute)
		labels = append(labels, l.model.ScriptedRequests()[served].Time.Sub(labelAt))
		pr := 0
		for _, p := range l.gh.PullRequests(e2eRepo) {
			pr = max(pr, p.Number) // this round's is the newest
		}
		branch := l.gh.Issue(e2eRepo, pr).PR.Head
		_, suite := l.playChecks(branch, l.gh.BranchSHA(e2eRepo, branch), false)
		served = len(l.model.ScriptedRequests())
		ciAt := time.Now()
		l.deliver("check_suite", fmt.Sprintf("d-suite-%d", i), suite)
		l.waitComment(pr, "a CI fix for `test`", 10*time.Minute)
		fixes = append(fixes, l.model.ScriptedRequests()[served].Time.Sub(ciAt))
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("round %d: label → first model request %s; checks failed → fix run's first model request %s (×%.2f); load average %s",
			i+1, labels[i].Round(time.Millisecond), fixes[i].Round(time.Millisecond), fixes[i].Seconds()/labels[i].Seconds(), strings.TrimSpace(string(load)))
	}
	mean := func(ds []time.Duration) time.Duration {
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		return s / time.Duration(len(ds))
	}
	t.Logf("means over %d rounds: checks failed → first model request %s beside label → first model request %s: ×%.2f (goal ≤ 1.2)",
		rounds, mean(fixes).Round(time.Millisecond), mean(labels).Round(time.Millisecond), mean(fixes).Seconds()/mean(labels).Seconds())
	logCheckBytes(t, l.bot.logs.String())
	logStages(t, l.bot.logs.String())
}
