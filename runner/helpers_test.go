package runner_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// projectFiles is the repository the agent works on in these tests: a tiny
// shell "library" with a real test script, so checks pass or fail on what
// the agent wrote.
func projectFiles() map[string]string {
	return map[string]string{
		"README.md": "# calc\n\nAdds numbers.\n",
		"add.sh":    "#!/bin/sh\n# add A B prints A+B\necho $(( $1 + $2 ))\n",
		"test.sh":   "#!/bin/sh\ngot=$(sh add.sh 2 3)\nif [ \"$got\" != 5 ]; then echo \"FAIL: add 2 3: expected 5, got $got\"; exit 1; fi\necho ok\n",
	}
}

const taskID = "T-0A1B2C3D"

// TestMain lets the test binary double as a project's dev server (for the
// media tests): with RUNNER_TEST_SERVE=1 it serves its working directory
// on $PORT. The runs wait on their agents and git for much of their time,
// so unless -parallel is given two run per CPU instead of one.
func TestMain(m *testing.M) {
	if os.Getenv("RUNNER_TEST_SERVE") == "1" {
		http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.FileServer(http.Dir(".")))
		os.Exit(0)
	}
	testenv.ParallelPerCPU(2)
	os.Exit(m.Run())
}

func order(t *testing.T, remote string, mode dispatch.Mode, cfg sandboxcfg.Config) dispatch.WorkOrder {
	t.Helper()
	return dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion,
		TaskID:        taskID,
		Mode:          mode,
		Attempt:       1,
		Repo:          "acme/calc",
		Number:        7,
		CloneURL:      remote,
		BaseBranch:    "main",
		TargetBranch:  dispatch.BranchName(taskID, "Add notes"),
		Task:          dispatch.TaskText{Title: "Add notes", Body: "Write NOTES.md describing add.sh."},
		Plan:          "1. Write NOTES.md.",
		Config:        sandboxcfg.MustResolve(cfg),
		BudgetUSD:     5,
		OutputDir:     filepath.Join(t.TempDir(), "out"),
	}
}

type runEnv struct {
	opts     runner.Options
	progress *testenv.Log
	log      *testenv.Log
	home     string
}

func newRunEnv(t *testing.T, env []string) *runEnv {
	t.Helper()
	e := &runEnv{progress: &testenv.Log{}, log: &testenv.Log{}}
	if env == nil {
		e.home = t.TempDir()
		env = runtest.HermeticEnv(e.home)
	} else if h, ok := lookup(env, "HOME"); ok {
		e.home = h
	}
	work := t.TempDir()
	e.opts = runner.Options{
		Environ:      env,
		Progress:     e.progress,
		Log:          e.log,
		WorkDir:      filepath.Join(work, "work"),
		StateDir:     filepath.Join(work, "state"),
		KillGrace:    2 * time.Second,
		StartupGrace: 90 * time.Second,
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner log:\n%s", e.log.String())
			t.Logf("progress:\n%s", e.progress.String())
		}
	})
	return e
}

func lookup(env []string, key string) (string, bool) {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return e[len(key)+1:], true
		}
	}
	return "", false
}

// openCodeRunEnv sets up the real OpenCode CLI against a scripted model.
func openCodeRunEnv(t *testing.T, script []modeltest.Turn) (*runEnv, *modeltest.Server) {
	t.Helper()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, script)
	e := newRunEnv(t, runtest.OpenCodeEnv(t, srv))
	// The runner's own binary copies OpenCode's sessions, as the agent.
	e.opts.Bins = harness.Bins{OpenCode: bin, Runner: testenv.BuildCommand(t, "sandbox-runner")}
	return e, srv
}

func run(t *testing.T, e *runEnv, o dispatch.WorkOrder) *dispatch.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return runCtx(t, ctx, e, o)
}

func runCtx(t *testing.T, ctx context.Context, e *runEnv, o dispatch.WorkOrder) *dispatch.Result {
	t.Helper()
	res := runner.Run(ctx, o, e.opts)
	// The receipt on disk is the contract; check it matches what Run returned.
	b, err := os.ReadFile(filepath.Join(o.OutputDir, dispatch.ResultFile))
	if err != nil {
		t.Fatalf("no result.json written: %v", err)
	}
	disk, err := dispatch.ParseResult(b)
	if err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if disk.Status != res.Status || disk.TaskID != o.TaskID {
		t.Fatalf("result.json says %s for %s, Run returned %s", disk.Status, disk.TaskID, res.Status)
	}
	return disk
}

func wantStatus(t *testing.T, res *dispatch.Result, want dispatch.Status) {
	t.Helper()
	if res.Status != want {
		msg := ""
		if res.Error != nil {
			msg = res.Error.Message
		}
		t.Fatalf("status = %s (%s), want %s", res.Status, msg, want)
	}
}

// progressLines parses the progress output and checks every line is one.
func progressLines(t *testing.T, out string) []dispatch.Progress {
	t.Helper()
	var ps []dispatch.Progress
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		p, ok := dispatch.ParseProgress([]byte(l))
		if !ok {
			t.Fatalf("stdout line is not a progress event: %q", l)
		}
		if p.TaskID != taskID {
			t.Fatalf("progress line for task %q", p.TaskID)
		}
		ps = append(ps, p)
	}
	return ps
}

func checkByName(res *dispatch.Result, name string) *dispatch.CheckResult {
	for i := range res.Validation {
		if res.Validation[i].Name == name {
			return &res.Validation[i]
		}
	}
	return nil
}

func checks(kv ...string) sandboxcfg.Checks {
	var cs sandboxcfg.Checks
	for i := 0; i+1 < len(kv); i += 2 {
		cs = append(cs, sandboxcfg.Check{Name: kv[i], Command: kv[i+1]})
	}
	return cs
}

// grepTree reports files under root containing needle.
func grepTree(t *testing.T, root, needle string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(needle)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// wantFirstTurn checks that the run's progress says once, after the agent
// started and before its first step ended, when the agent's first model
// turn began, and that the receipt's timings hold that span.
func wantFirstTurn(t *testing.T, ps []dispatch.Progress, res *dispatch.Result) {
	t.Helper()
	started, first, stepDone := -1, -1, -1
	for i, p := range ps {
		switch {
		case strings.HasPrefix(p.Message, "agent ") && strings.HasSuffix(p.Message, " started") && started < 0:
			started = i
		case strings.HasPrefix(p.Message, "agent's first model request "):
			if first >= 0 {
				t.Fatalf("two first-turn lines: %q and %q", ps[first].Message, p.Message)
			}
			first = i
		case strings.HasPrefix(p.Message, "step ") && stepDone < 0:
			stepDone = i
		}
	}
	if started < 0 || first < 0 || stepDone < 0 || !(started < first && first < stepDone) {
		t.Fatalf("progress: agent started at line %d, first model turn at %d, first step done at %d; want them in that order: %+v", started, first, stepDone, ps)
	}
	if !ps[first].Time.After(ps[started].Time) {
		t.Fatalf("first model turn at %s, not after the agent started at %s", ps[first].Time, ps[started].Time)
	}
	if res.Timings == nil {
		t.Fatal("no timings in the result")
	}
	for _, st := range res.Timings.Stages {
		if st.Stage == runner.StageAgentStart {
			if st.Seconds <= 0 {
				t.Fatalf("stage %q took %v s", st.Stage, st.Seconds)
			}
			return
		}
	}
	t.Fatalf("no %q stage in the timings: %+v", runner.StageAgentStart, res.Timings.Stages)
}
