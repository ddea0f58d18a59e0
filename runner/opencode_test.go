package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// These tests run the real OpenCode CLI (opencode-ai, pinned in
// package.json) against the scripted model: it really edits the checkout,
// and the runner parses its real event stream.

func write(path, content string) modeltest.ToolCall {
	return modeltest.ToolCall{Name: "write", Args: map[string]any{"filePath": path, "content": content}}
}

func bash(cmd string) modeltest.ToolCall {
	return modeltest.ToolCall{Name: "bash", Args: map[string]any{"command": cmd, "description": "run " + cmd}}
}

func usage(in, out int64) modeltest.Usage {
	return modeltest.Usage{PromptTokens: in, CompletionTokens: out}
}

func cost(in, out int64) float64 {
	return (float64(in)*modeltest.InputPricePerM + float64(out)*modeltest.OutputPricePerM) / 1e6
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// Execute end to end over HTTP with a token: the agent runs the tests,
// writes a file, the runner commits and pushes it through the credential
// helper, validates, and the receipt carries tokens, steps, cost and checks.
// It is also the canary: neither the token nor a secret shows up anywhere.
func TestOpenCodeExecute(t *testing.T) {
	t.Parallel()
	const token = "ghs_CANARYexecute0123456789abcdefABCDEF"
	const secret = "sk-CANARY-secret-value-987654321"
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{Text: "Running the tests first.", ToolCalls: []modeltest.ToolCall{bash("sh test.sh")}, Usage: usage(1000, 50)},
		{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "# Notes\n\n`add.sh A B` prints the sum.\n")}, Usage: usage(1500, 200)},
		{Text: "Added NOTES.md describing add.sh.", Usage: usage(1800, 30)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	secrets := t.TempDir()
	tokenFile := filepath.Join(secrets, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpRemote := gitservetest.Serve(t, remote.Dir, gitservetest.Options{Token: token})

	cfg := sandboxcfg.Config{
		Env:      map[string]string{"API_KEY": "${MY_API_SECRET}"},
		Validate: checks("test", "sh test.sh", "notes", "test -s NOTES.md", "env", `echo "api key is $API_KEY"`),
	}
	e.opts.Environ = append(e.opts.Environ, "MY_API_SECRET="+secret)
	o := order(t, httpRemote.URL, dispatch.ModeExecute, cfg)
	o.TokenFile = tokenFile
	o.SecretEnv = []string{"MY_API_SECRET"}
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)

	if got, ok := remote.File(t, o.TargetBranch, "NOTES.md"); !ok || !strings.Contains(got, "prints the sum") {
		t.Fatalf("NOTES.md on the remote = %q, %v", got, ok)
	}
	if res.HeadSHA == "" || res.HeadSHA != remote.SHA(t, o.TargetBranch) || len(res.Commits) != 1 {
		t.Fatalf("head %s commits %+v; remote at %s", res.HeadSHA, res.Commits, remote.SHA(t, o.TargetBranch))
	}
	if res.DiffStats.FilesChanged != 1 || res.DiffStats.Insertions != 3 {
		t.Fatalf("diff_stats = %+v", res.DiffStats)
	}
	tu := res.TokenUsage
	if tu.Input != 4300 || tu.Output != 280 || tu.Steps != 3 || !near(tu.TotalCostUSD, cost(4300, 280)) {
		t.Fatalf("token_usage = %+v, want 4300 in, 280 out, 3 steps, $%v", tu, cost(4300, 280))
	}
	if res.PRSummary != "Added NOTES.md describing add.sh." {
		t.Fatalf("pr_summary = %q", res.PRSummary)
	}
	if res.Tools["bash"] != 1 || res.Tools["write"] != 1 || res.BrowserCalls() != 0 {
		t.Fatalf("tools = %v, want one bash and one write call", res.Tools)
	}
	// A project without dev gets no browser and no browser text.
	if first := srv.ScriptedRequests()[0]; strings.Contains(first.LastUser(), "# Browser") || strings.Contains(strings.Join(first.Tools, " "), "browser_") {
		t.Fatalf("a project without dev got the browser (tools %v)", first.Tools)
	}
	for _, name := range []string{"test", "notes", "env"} {
		if c := checkByName(res, name); c == nil || !c.Passed || c.Attempts != 1 {
			t.Fatalf("check %s = %+v", name, c)
		}
	}
	if tail := checkByName(res, "env").OutputTail; tail != "api key is "+"[REDACTED]" {
		t.Fatalf("env check tail = %q, want the secret redacted", tail)
	}
	// The bash tool call really ran the repo's tests inside the checkout.
	if results := srv.ScriptedRequests()[1].ToolResults(); len(results) != 1 || !strings.Contains(results[0], "ok") {
		t.Fatalf("bash tool result = %q", results)
	}
	var tools []string
	for _, p := range progressLines(t, e.progress.String()) {
		if p.Tool != "" {
			tools = append(tools, p.Tool)
		}
	}
	if strings.Join(tools, ",") != "bash,write" {
		t.Fatalf("tool progress = %v", tools)
	}
	wantFirstTurn(t, progressLines(t, e.progress.String()), res)
	if authed, _, pushes := httpRemote.Counts(); authed == 0 || pushes == 0 {
		t.Fatalf("the token was not used: %d authenticated requests, %d pushes", authed, pushes)
	}

	// Canary: the token is in no file the run touched (checkout and its
	// .git/config, state, receipt, the agent's home with its session store
	// and logs) and in no log line; the secret is in none of the runner's
	// outputs.
	for _, root := range []string{filepath.Dir(e.opts.WorkDir), filepath.Dir(o.OutputDir), e.home} {
		if hits := grepTree(t, root, token); len(hits) > 0 {
			t.Fatalf("token found in %v", hits)
		}
	}
	for _, out := range []string{e.log.String(), e.progress.String()} {
		if strings.Contains(out, token) || strings.Contains(out, secret) {
			t.Fatal("token or secret in the runner's log or progress")
		}
	}
	if hits := grepTree(t, o.OutputDir, secret); len(hits) > 0 {
		t.Fatalf("secret found in %v", hits)
	}
}

// A failing check goes back to the agent in the same session, with only the
// failing checks' output; the fix is committed, pushed and re-validated.
func TestOpenCodeRepairInSameSession(t *testing.T) {
	t.Parallel()
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n")}, Usage: usage(1000, 100)},
		{Text: "Rewrote add.sh.", Usage: usage(1100, 10)},
		// repair
		{ToolCalls: []modeltest.ToolCall{write("add.sh", "#!/bin/sh\necho $(( $1 + $2 ))\n")}, Usage: usage(1300, 100)},
		{Text: "Fixed the operator.", Usage: usage(1400, 10)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	cfg := sandboxcfg.Config{Validate: checks("lint", "echo LINT-PASSED-MARKER", "test", "sh test.sh")}
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	o.Task = dispatch.TaskText{Title: "Rewrite add.sh", Body: "Make add.sh shorter."}
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)

	reqs := srv.ScriptedRequests()
	if len(reqs) != 4 {
		t.Fatalf("scripted requests = %d", len(reqs))
	}
	repairPrompt := reqs[2].LastUser()
	if !strings.Contains(repairPrompt, "FAIL: add 2 3: expected 5, got -1") || !strings.Contains(repairPrompt, "## test: `sh test.sh`") {
		t.Fatalf("repair prompt lacks the failing output:\n%s", repairPrompt)
	}
	if strings.Contains(repairPrompt, "LINT-PASSED-MARKER") {
		t.Fatalf("repair prompt carries a passing check's output:\n%s", repairPrompt)
	}
	// Same session: the repair request carries the whole conversation.
	if first := reqs[2].Messages[1].Content; !strings.Contains(first, "Implement the following task") {
		t.Fatalf("repair request does not continue the session; first user message: %.200q", first)
	}
	if len(res.Repairs) != 1 || !res.Repairs[0].Fixed || res.Repairs[0].FailedChecks[0] != "test" || !near(res.Repairs[0].CostUSD, cost(2700, 110)) {
		t.Fatalf("repairs = %+v", res.Repairs)
	}
	if c := checkByName(res, "test"); !c.Passed || c.Attempts != 2 {
		t.Fatalf("test check = %+v", c)
	}
	if got, _ := remote.File(t, o.TargetBranch, "add.sh"); !strings.Contains(got, "$1 + $2") {
		t.Fatalf("pushed add.sh = %q", got)
	}
	if len(res.Commits) != 2 || !strings.HasPrefix(res.Commits[1].Message, "Fix failing checks: test (repair 1)") {
		t.Fatalf("commits = %+v", res.Commits)
	}
	if res.TokenUsage.Steps != 4 || !near(res.TokenUsage.TotalCostUSD, cost(4800, 220)) {
		t.Fatalf("token_usage = %+v", res.TokenUsage)
	}
}

// Two repairs that fix nothing end the run failed, both recorded.
func TestOpenCodeRepairGivesUp(t *testing.T) {
	t.Parallel()
	e, _ := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("add.sh", "#!/bin/sh\necho 0\n")}, Usage: usage(1000, 100)},
		{Text: "Simplified add.sh.", Usage: usage(1100, 10)},
		{Text: "I believe the test is wrong.", Usage: usage(1200, 10)},
		{Text: "Still think so.", Usage: usage(1300, 10)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{Validate: checks("test", "sh test.sh")})
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	if len(res.Repairs) != 2 || res.Repairs[0].Fixed || res.Repairs[1].Fixed || res.Repairs[1].Attempt != 2 {
		t.Fatalf("repairs = %+v", res.Repairs)
	}
	if c := checkByName(res, "test"); c.Passed || c.Attempts != 3 || !strings.Contains(c.OutputTail, "expected 5, got 0") {
		t.Fatalf("test check = %+v", c)
	}
	if !strings.Contains(res.Error.Message, "checks still failing after 2 repair attempt(s): test") {
		t.Fatalf("error = %q", res.Error.Message)
	}
	// The work is pushed anyway, for a person to look at.
	if _, ok := remote.File(t, o.TargetBranch, "add.sh"); !ok {
		t.Fatal("branch not pushed")
	}
}

func TestOpenCodePlan(t *testing.T) {
	t.Parallel()
	plan := "## Plan\n\n1. Add `NOTES.md` describing `add.sh`.\n2. No code changes."
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "read", Args: map[string]any{"filePath": "add.sh"}}}, Usage: usage(900, 20)},
		{Text: plan, Usage: usage(1000, 80)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModePlan, sandboxcfg.Config{})
	o.Plan = ""
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if res.Plan != plan {
		t.Fatalf("plan = %q", res.Plan)
	}
	reqs := srv.ScriptedRequests()
	if !strings.Contains(reqs[0].LastUser(), "Change nothing") {
		t.Fatalf("plan prompt: %s", reqs[0].LastUser())
	}
	for _, tool := range reqs[0].Tools {
		if tool == "write" || tool == "edit" {
			t.Fatalf("plan mode offered the %s tool", tool)
		}
	}
	if !strings.Contains(strings.Join(reqs[1].ToolResults(), ""), "echo $(( $1 + $2 ))") {
		t.Fatal("the read tool did not read the checkout")
	}
	if remote.SHA(t, o.TargetBranch) != "" {
		t.Fatal("plan mode pushed a branch")
	}
	if res.TokenUsage.Steps != 2 || res.HeadSHA != "" {
		t.Fatalf("result = %+v", res)
	}
}

func TestOpenCodePlanThatEditsIsRejected(t *testing.T) {
	t.Parallel()
	e, _ := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{bash("echo sneaky >> README.md")}, Usage: usage(900, 20)},
		{Text: "## Plan\n\nAlready done it.", Usage: usage(1000, 30)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModePlan, sandboxcfg.Config{})
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	if !strings.Contains(res.Error.Message, "plan mode must not change the repository") || !strings.Contains(res.Error.Message, "README.md") {
		t.Fatalf("error = %q", res.Error.Message)
	}
	if res.Plan != "" {
		t.Fatalf("a rejected plan was kept: %q", res.Plan)
	}
}

// A model that stops answering mid-stream trips the watchdog: the agent is
// killed, the work so far is pushed, and the receipt says where it stood.
func TestOpenCodeWatchdog(t *testing.T) {
	t.Parallel()
	e, _ := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("DRAFT.md", "draft\n")}, Usage: usage(1000, 100)},
		{Stall: true},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{InactivitySeconds: 3})
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusHung)
	d := res.Error.Diagnostic
	if d == nil || d.CompletedSteps != 1 || d.CurrentStep < 1 || !near(d.CostSoFarUSD, cost(1000, 100)) || d.IdleSeconds < 3 {
		t.Fatalf("diagnostic = %+v", d)
	}
	if d.LastEventType != "step_finish" && d.LastEventType != "step_start" {
		t.Fatalf("last event = %s", d.LastEventType)
	}
	if !strings.Contains(res.Error.Message, "no event for 3s") {
		t.Fatalf("error = %q", res.Error.Message)
	}
	if got, ok := remote.File(t, o.TargetBranch, "DRAFT.md"); !ok || got != "draft" {
		t.Fatalf("DRAFT.md on the remote = %q, %v", got, ok)
	}
}

func TestOpenCodeBudgetExceeded(t *testing.T) {
	t.Parallel()
	e, _ := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("BIG.md", "expensive\n")}, Usage: usage(5000, 100)},
		{Delay: 30 * time.Second, Text: "never needed"},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{})
	o.BudgetUSD = 0.01
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusBudgetExceeded)
	if d := res.Error.Diagnostic; d == nil || d.CostSoFarUSD < 0.01 || d.CompletedSteps != 1 {
		t.Fatalf("diagnostic = %+v", res.Error.Diagnostic)
	}
	if !strings.Contains(res.Error.Message, "max_budget_usd ($0.01)") {
		t.Fatalf("error = %q", res.Error.Message)
	}
	if _, ok := remote.File(t, o.TargetBranch, "BIG.md"); !ok {
		t.Fatal("work not pushed after the budget stop")
	}
}

// OpenCode auto-rejects a write outside the project in headless mode; the
// runner tells the agent what was rejected and why, and it gets one more
// pass in the same session.
func TestOpenCodeRejectedOperationGetsAnotherPass(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "scratch.md")
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write(outside, "notes\n")}, Usage: usage(1000, 50)},
		{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "notes\n")}, Usage: usage(1200, 50)},
		{Text: "Wrote NOTES.md inside the repository instead.", Usage: usage(1300, 20)},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{})
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("the write outside the checkout went through")
	}
	reqs := srv.ScriptedRequests()
	retry := reqs[1].LastUser()
	if !strings.Contains(retry, "external_directory") || !strings.Contains(retry, "nobody can approve") {
		t.Fatalf("retry prompt:\n%s", retry)
	}
	if _, ok := remote.File(t, o.TargetBranch, "NOTES.md"); !ok {
		t.Fatal("NOTES.md not pushed")
	}
	if res.PRSummary != "Wrote NOTES.md inside the repository instead." {
		t.Fatalf("summary = %q", res.PRSummary)
	}
}

// sandboxRunner builds cmd/sandbox-runner once per test binary.
func sandboxRunner(t *testing.T) string { return testenv.BuildCommand(t, "sandbox-runner") }

// SIGTERM to the real sandbox-runner binary mid-run: the agent is stopped,
// its committed work pushed, and the receipt says interrupted.
func TestSandboxRunnerSIGTERM(t *testing.T) {
	t.Parallel()
	bin := sandboxRunner(t)
	e, srv := openCodeRunEnv(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("PART1.md", "first half\n")}, Usage: usage(1000, 100)},
		{Stall: true},
	})
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModeExecute, sandboxcfg.Config{})
	dir := t.TempDir()
	orderPath := filepath.Join(dir, "work-order.json")
	b, _ := json.Marshal(o)
	os.WriteFile(orderPath, b, 0o644)

	cmd := exec.Command(bin, "run", "--work-order", orderPath)
	cmd.Env = append(e.opts.Environ,
		"SANDBOX_OPENCODE_BIN="+e.opts.Bins.OpenCode,
		"SANDBOX_WORKSPACE="+filepath.Join(dir, "work"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	// stdout is read here, line by line, so the test can wait for the
	// runner's own word that step 1 is done: OpenCode prints a step's
	// events late, so the model having served the second turn does not
	// mean the runner has read the first step's end yet (seen under load).
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stepDone, readDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(outPipe)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		signalled := false
		for sc.Scan() {
			stdout.Write(sc.Bytes())
			stdout.WriteByte('\n')
			if p, ok := dispatch.ParseProgress(sc.Bytes()); ok && !signalled && p.Message == "step 1 done" {
				signalled = true
				close(stepDone)
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The second turn is the stalled one: the agent has written PART1.md,
	// and the runner has seen its first step end.
	if err := srv.WaitServed(ctx, 2); err != nil {
		cmd.Process.Kill()
		t.Fatalf("the agent never reached its second turn: %v\n%s", err, stderr.String())
	}
	select {
	case <-stepDone:
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("the runner never reported step 1 done\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-readDone // read to its end before Wait, which closes the pipe
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want code 1\nstderr:\n%s", err, stderr.String())
	}
	rb, err := os.ReadFile(filepath.Join(o.OutputDir, dispatch.ResultFile))
	if err != nil {
		t.Fatalf("no receipt after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
	}
	res, err := dispatch.ParseResult(rb)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, dispatch.StatusInterrupted)
	if d := res.Error.Diagnostic; d == nil || d.CompletedSteps != 1 {
		t.Fatalf("diagnostic = %+v", res.Error.Diagnostic)
	}
	if got, ok := remote.File(t, o.TargetBranch, "PART1.md"); !ok || got != "first half" {
		t.Fatalf("PART1.md on the remote = %q, %v", got, ok)
	}
	if res.HeadSHA != remote.SHA(t, o.TargetBranch) {
		t.Fatal("receipt head_sha differs from the pushed branch")
	}
	ps := progressLines(t, stdout.String())
	if last := ps[len(ps)-1]; last.Status != dispatch.StatusInterrupted {
		t.Fatalf("last progress line = %+v", last)
	}
	if !strings.Contains(stderr.String(), `"task_id":"`+taskID+`"`) {
		t.Fatalf("stderr lacks the zerolog lines with the task id:\n%s", stderr.String())
	}
}
