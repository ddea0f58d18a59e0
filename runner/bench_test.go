package runner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkRunnerOverhead measures a whole runner execute run (clone,
// agent, commit, push, receipt) against `opencode run` started directly in
// an existing checkout, with the same scripted two-step conversation, in
// the same benchmark run: the floor and the runner alternate, so load on
// the machine hits both alike. Reported: the ratio (goal <= 1.05) and both
// times.
func BenchmarkRunnerOverhead(b *testing.B) {
	bin := testenv.NPMBin(b, "opencode")
	srv := modeltest.Start(b, nil)
	env := runtest.OpenCodeEnv(b, srv)
	remote := runtest.NewRemote(b, projectFiles())
	turns := func(i int) []modeltest.Turn {
		return []modeltest.Turn{
			{ToolCalls: []modeltest.ToolCall{write("NOTES-"+strconv.Itoa(i)+".md", "notes\n")}, Usage: usage(1000, 50)},
			{Text: "Done.", Usage: usage(1100, 10)},
		}
	}
	h := harness.NewOpenCode(bin)
	direct := func(i int) time.Duration {
		dir := b.TempDir()
		runtest.Git(b, dir, "clone", "--quiet", remote.URL, "repo")
		srv.Append(turns(i)...)
		cmd, err := h.Command(harness.Request{Dir: filepath.Join(dir, "repo"), Prompt: "Write the notes.", Model: srv.OpenCodeModel(), Env: env})
		if err != nil {
			b.Fatal(err)
		}
		return runtest.TimedRun(b, "opencode run", cmd)
	}
	viaRunner := func(i int) time.Duration {
		srv.Append(turns(i)...)
		work := b.TempDir()
		o := dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: fmt.Sprintf("T-%08X", 0xBE000000+i), Mode: dispatch.ModeExecute, Attempt: 1,
			CloneURL: remote.URL, BaseBranch: "main", TargetBranch: "agent/bench-" + strconv.Itoa(i),
			Task: dispatch.TaskText{Title: "Write the notes"}, Plan: "Write them.",
			Config: sandboxcfg.MustResolve(sandboxcfg.Config{}), BudgetUSD: 5, OutputDir: filepath.Join(work, "out"),
		}
		start := time.Now()
		res := runner.Run(context.Background(), o, runner.Options{
			Environ: env, Bins: harness.Bins{OpenCode: bin},
			WorkDir: filepath.Join(work, "work"), StartupGrace: 90 * time.Second,
		})
		d := time.Since(start)
		if res.Status != dispatch.StatusCompleted {
			b.Fatalf("runner: %s %+v", res.Status, res.Error)
		}
		return d
	}
	// Warm both paths once (first start of the CLI, page cache).
	direct(0)
	viaRunner(0)
	const pairs = 3
	var floor, total time.Duration
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < pairs; j++ {
			n++
			// Alternate which goes first, so neither always meets a
			// warmer (or busier) machine.
			if n%2 == 0 {
				floor += direct(n)
				total += viaRunner(n)
			} else {
				total += viaRunner(n)
				floor += direct(n)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/float64(floor), "x-of-direct")
	b.ReportMetric(float64(floor.Milliseconds())/float64(n), "direct-ms/run")
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "runner-ms/run")
}
