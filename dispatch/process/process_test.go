package process_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// runnerBin builds the real cmd/sandbox-runner once.
func runnerBin(t *testing.T) string { return testenv.BuildCommand(t, "sandbox-runner") }

func newBackend(t *testing.T, runner string, dataDir string) (*process.Backend, *bytes.Buffer) {
	t.Helper()
	var warn bytes.Buffer
	b, err := process.New(process.Options{
		Runner:    runner,
		DataDir:   dataDir,
		Env:       runtest.HermeticEnv(t.TempDir()),
		StopGrace: 20 * time.Second,
		Warnings:  &warn,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, &warn
}

const taskID = "T-11223344"

func spec(remote string, script string) dispatch.RunSpec {
	return dispatch.RunSpec{
		Meta: dispatch.Meta{TaskID: taskID, Mode: dispatch.ModeExecute, Repo: "acme/calc", Number: 3, Attempt: 1},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion,
			TaskID:        taskID,
			Mode:          dispatch.ModeExecute,
			Attempt:       1,
			Repo:          "acme/calc",
			Number:        3,
			CloneURL:      remote,
			BaseBranch:    "main",
			TargetBranch:  "agent/t-11223344-notes",
			Task:          dispatch.TaskText{Title: "Notes", Body: "Add notes."},
			Plan:          "1. Write NOTES.md.",
			Config:        sandboxcfg.MustResolve(sandboxcfg.Config{Harness: "command", Command: script, Validate: sandboxcfg.Checks{{Name: "notes", Command: "test -s NOTES.md"}}}),
			OutputDir:     "/ignored/the/backend/sets/it",
		},
		Token: "ghs_processBackendToken0123456789",
	}
}

func TestSubmitWaitResult(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, map[string]string{"README.md": "hi\n"})
	b, warn := newBackend(t, runnerBin(t), t.TempDir())
	if !strings.Contains(warn.String(), "NO isolation") {
		t.Fatalf("no loud warning: %q", warn.String())
	}
	ctx := context.Background()
	s := spec(remote.URL, `echo '{"type":"step_finish","tokens":{"input":5,"output":5},"cost_usd":0.1}'; echo notes > NOTES.md; echo Done.`)
	created, err := b.Submit(ctx, s)
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	// A redelivered webhook: same task id, no second runner.
	again, err := b.Submit(ctx, s)
	if err != nil || again {
		t.Fatalf("second Submit = %v, %v; want false, nil", again, err)
	}
	var stages []string
	st, err := b.Wait(ctx, taskID, func(p dispatch.Progress) { stages = append(stages, p.Stage) })
	if err != nil {
		t.Fatal(err)
	}
	if st.State != dispatch.StateComplete || st.ExitCode != 0 || st.Meta.Repo != "acme/calc" {
		t.Fatalf("status = %+v\nlog:\n%s", st, readLog(t, b))
	}
	if len(stages) == 0 || stages[len(stages)-1] != "done" || !contains(stages, "push") {
		t.Fatalf("progress stages = %v", stages)
	}
	res, err := b.Result(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusCompleted || res.TokenUsage.TotalCostUSD != 0.1 {
		t.Fatalf("result = %+v", res)
	}
	if got, _ := remote.File(t, "agent/t-11223344-notes", "NOTES.md"); got != "notes" {
		t.Fatalf("NOTES.md on the remote = %q", got)
	}

	// The token is a 0600 file, and only there.
	tok := filepath.Join(b.TaskDir(taskID), "secrets", "token")
	fi, err := os.Stat(tok)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	for _, f := range []string{"work-order.json", "meta.json", "runner.log", "out/result.json"} {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(tok)), f))
		if bytes.Contains(b, []byte(s.Token)) {
			t.Fatalf("the token is in %s", f)
		}
	}

	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Meta.TaskID != taskID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := b.Cleanup(ctx, taskID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Status(ctx, taskID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("status after cleanup: %v", err)
	}
}

// Cancel is SIGTERM: the runner stops the agent, pushes the work so far
// and writes an interrupted receipt.
func TestCancelInterruptsAndPushes(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, map[string]string{"README.md": "hi\n"})
	b, _ := newBackend(t, runnerBin(t), t.TempDir())
	ctx := context.Background()
	s := spec(remote.URL, `echo half > HALF.md; echo '{"type":"step_start"}'; sleep 120`)
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := b.Wait(waitCtx, taskID, func(p dispatch.Progress) {
		if p.Stage == "agent" && strings.Contains(p.Message, "started") {
			go func() {
				// Let the script write its file first.
				half := filepath.Join(b.TaskDir(taskID), "work", "repo", "HALF.md")
				deadline := time.Now().Add(time.Minute)
				// Its content, not only its name: the shell creates the
				// file before it writes to it.
				for b, _ := os.ReadFile(half); string(b) != "half\n"; b, _ = os.ReadFile(half) {
					if time.Now().After(deadline) {
						t.Errorf("the agent never wrote %s", half)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err := b.Cancel(ctx, taskID); err != nil {
					t.Error(err)
				}
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 1 {
		t.Fatalf("exit code = %d\nlog:\n%s", st.ExitCode, readLog(t, b))
	}
	res, err := b.Result(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusInterrupted {
		t.Fatalf("status = %s", res.Status)
	}
	if got, ok := remote.File(t, "agent/t-11223344-notes", "HALF.md"); !ok || got != "half" {
		t.Fatalf("HALF.md on the remote = %q, %v", got, ok)
	}
}

// A runner that ignores SIGTERM is killed after the grace period.
func TestCancelEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stubborn := filepath.Join(dir, "stubborn-runner")
	os.WriteFile(stubborn, []byte("#!/bin/sh\ntrap '' TERM\necho '{\"event\":\"progress\",\"stage\":\"agent\",\"message\":\"ignoring TERM\"}'\nsleep 300 &\nwait\n"), 0o755)
	var warn bytes.Buffer
	b, err := process.New(process.Options{Runner: stubborn, DataDir: t.TempDir(), StopGrace: time.Second, Warnings: &warn})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Submit(ctx, spec("file:///nonexistent", "true")); err != nil {
		t.Fatal(err)
	}
	var got []string
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := b.Wait(waitCtx, taskID, func(p dispatch.Progress) {
		got = append(got, p.Message)
		b.Cancel(ctx, taskID)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != dispatch.StateComplete || st.ExitCode != -1 {
		t.Fatalf("status = %+v, want killed by a signal", st)
	}
	if len(got) != 1 || got[0] != "ignoring TERM" {
		t.Fatalf("progress = %v", got)
	}
	if _, err := b.Result(ctx, taskID); !errors.Is(err, dispatch.ErrNoResult) {
		t.Fatalf("Result = %v, want ErrNoResult", err)
	}
}

// A second Backend on the same data dir (a restarted bot) sees the runs.
func TestStatusAfterRestartAndRefreshToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(t.TempDir(), "slow-runner")
	// A stand-in runner that waits until its token file changes.
	os.WriteFile(script, []byte(`#!/bin/sh
tok=$(sed -n 's/.*"token_file": "\(.*\)".*/\1/p' "$SANDBOX_WORK_ORDER")
first=$(cat "$tok")
echo '{"event":"progress","stage":"setup","message":"ready"}'
while [ "$(cat "$tok")" = "$first" ]; do sleep 0.05; done
echo '{"event":"progress","stage":"done","message":"token refreshed"}'
`), 0o755)
	var warn bytes.Buffer
	b1, err := process.New(process.Options{Runner: script, DataDir: dir, Warnings: &warn})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b1.Submit(ctx, spec("file:///x", "true")); err != nil {
		t.Fatal(err)
	}
	b2, err := process.New(process.Options{Runner: script, DataDir: dir, Warnings: &warn})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b2.Status(ctx, taskID)
	if err != nil || st.State != dispatch.StateRunning || st.Meta.Number != 3 {
		t.Fatalf("status from the second backend = %+v, %v", st, err)
	}
	if err := b2.Cleanup(ctx, taskID); err == nil {
		t.Fatal("Cleanup of a running task succeeded")
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err = b1.Wait(waitCtx, taskID, func(p dispatch.Progress) {
		if p.Message == "ready" {
			if err := b2.RefreshToken(ctx, taskID, "ghs_refreshed"); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("wait = %+v, %v", st, err)
	}
	if st2, _ := b2.Status(ctx, taskID); st2.State != dispatch.StateComplete {
		t.Fatalf("second backend sees %s", st2.State)
	}
	// The restarted bot reads back the token the run holds, to revoke it.
	if tok, err := b2.CurrentToken(ctx, taskID); err != nil || tok != "ghs_refreshed" {
		t.Fatalf("CurrentToken = %q, %v", tok, err)
	}
	if err := b2.Cleanup(ctx, taskID); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.CurrentToken(ctx, taskID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("CurrentToken after Cleanup: %v, want ErrNotFound", err)
	}
}

func TestLocks(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t, "/bin/true", t.TempDir())
	ctx := context.Background()
	key := dispatch.LockKey("Acme/Calc", 3)
	if cur, err := b.Lock(ctx, key, "T-00000001"); err != nil || cur != "T-00000001" {
		t.Fatalf("Lock = %q, %v", cur, err)
	}
	if _, err := b.Lock(ctx, key, "T-00000001"); err != nil {
		t.Fatalf("re-lock by the holder: %v", err)
	}
	if cur, err := b.Lock(ctx, dispatch.LockKey("acme/calc", 3), "T-00000002"); !errors.Is(err, dispatch.ErrLocked) || cur != "T-00000001" {
		t.Fatalf("Lock by another = %q, %v", cur, err)
	}
	if err := b.Unlock(ctx, key, "T-00000002"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, key, "T-00000002"); !errors.Is(err, dispatch.ErrLocked) {
		t.Fatal("unlock by a non-holder released the lock")
	}
	if err := b.Unlock(ctx, key, "T-00000001"); err != nil {
		t.Fatal(err)
	}
	// Contended: exactly one of many wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := b.Lock(ctx, "acme/calc#9", fmt.Sprintf("T-%08X", i)); err == nil {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d lockers won", winners)
	}
	if err := b.Unlock(ctx, "free#1", "T-00000001"); err != nil {
		t.Fatalf("unlocking a free lock: %v", err)
	}
}

func TestBadSubmit(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t, runnerBin(t), t.TempDir())
	s := spec("file:///x", "true")
	s.Order.TaskID = "nope"
	if _, err := b.Submit(context.Background(), s); err == nil || !strings.Contains(err.Error(), "task id") {
		t.Fatalf("Submit with a bad id: %v", err)
	}
	s = spec("", "true")
	if _, err := b.Submit(context.Background(), s); err == nil || !strings.Contains(err.Error(), "clone_url") {
		t.Fatalf("Submit with a bad order: %v", err)
	}
	// The failed Submit left nothing behind, so a fixed retry works.
	if _, err := b.Status(context.Background(), taskID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("status after a failed submit: %v", err)
	}
	if _, err := process.New(process.Options{Runner: "/nonexistent/sandbox-runner", DataDir: t.TempDir()}); err == nil {
		t.Fatal("New accepted a missing runner")
	}
}

func readLog(t *testing.T, b *process.Backend) string {
	out, _ := os.ReadFile(b.LogPath(taskID))
	return string(out)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
