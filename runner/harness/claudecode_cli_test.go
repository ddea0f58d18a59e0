package harness_test

// These tests run the real Claude Code CLI (node_modules/.bin/claude, the
// version pinned in package.json) against the scripted Anthropic server:
// the CLI runs its real tool loop, edits real files in a real git repo and
// prints its real stream, which the harness parses.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// recordClaude rewrites testdata/claudecode/*.jsonl from the runs below.
var recordClaude = flag.Bool("claudecode.record", false, "write the Claude Code runs' stdout to testdata/claudecode")

// claudeRun is one finished CLI run.
type claudeRun struct {
	lines     [][]byte
	stderr    string
	events    []harness.Event
	parseErrs []error
	err       error // from cmd.Wait
}

func (r *claudeRun) ofType(typ harness.EventType) []harness.Event {
	var out []harness.Event
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (r *claudeRun) types() []harness.EventType {
	out := make([]harness.EventType, len(r.events))
	for i, e := range r.events {
		out[i] = e.Type
	}
	return out
}

// claudeEnv is a minimal environment: the test's PATH (git, the shell),
// a private HOME (Claude Code keeps sessions and settings there), and the
// scripted server.
func claudeEnv(home string, srv *modeltest.AnthropicServer) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}, srv.Env()...)
}

// claudeGitRepo makes a repository with one commit holding README.md.
func claudeGitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n\nGreeting: hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README.md")
	git("commit", "-q", "-m", "initial")
	return dir
}

func claudeGitStatus(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return string(out)
}

// runClaude runs the harness's command to the end, the way the runner
// does: stdout and stderr read on their own goroutines, every stdout line
// through one parser.
func runClaude(t *testing.T, h *harness.ClaudeCode, req harness.Request, record string) *claudeRun {
	t.Helper()
	cmd, err := h.Command(req)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()

	run := &claudeRun{}
	p := h.NewParser()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		run.lines = append(run.lines, line)
		evs, err := p.ParseStdout(line)
		if err != nil {
			run.parseErrs = append(run.parseErrs, err)
		}
		run.events = append(run.events, evs...)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stdout: %v", err)
	}
	run.err = cmd.Wait()
	run.stderr = stderr.String()
	if ctx.Err() != nil {
		t.Fatalf("claude did not finish within the deadline; stderr:\n%s", run.stderr)
	}
	if *recordClaude && record != "" {
		path := filepath.Join("testdata", "claudecode", record+".jsonl")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(bytes.Join(run.lines, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d lines to %s", len(run.lines), path)
	}
	return run
}

func claudeLogRun(t *testing.T, run *claudeRun, srv *modeltest.AnthropicServer) {
	t.Helper()
	t.Logf("exit: %v; stderr: %s", run.err, run.stderr)
	for _, r := range srv.Requests() {
		t.Logf("request %s %s model=%s stream=%v side=%v turn=%d tools=%d messages=%d", r.Method, r.Path, r.Model, r.Stream, r.Side, r.Turn, len(r.Tools), len(r.Messages))
	}
	for _, e := range run.events {
		t.Logf("event %-11s tool=%s text=%.80q tokens=%+v cost=%v", e.Type, e.Tool, e.Text, e.Tokens, e.CostUSD)
	}
}

// stepSum adds up the step_finish tokens.
func (r *claudeRun) stepSum() harness.Tokens {
	var sum harness.Tokens
	for _, f := range r.ofType(harness.EventStepFinish) {
		sum.Input += f.Tokens.Input
		sum.Output += f.Tokens.Output
		sum.Reasoning += f.Tokens.Reasoning
		sum.CacheRead += f.Tokens.CacheRead
		sum.CacheWrite += f.Tokens.CacheWrite
	}
	return sum
}

// claudeSameCost compares dollar amounts to a billionth of a dollar, below any
// rounding of the CLI's float arithmetic.
func claudeSameCost(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var claudeUUIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestClaudeCodeExecuteEditsFiles is an execute-mode run: the scripted
// model writes a new file, edits a tracked one and runs git through Bash;
// the files on disk, the events and the cost must all follow.
func TestClaudeCodeExecuteEditsFiles(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	hello := filepath.Join(repo, "hello.txt")
	readme := filepath.Join(repo, "README.md")
	usages := []modeltest.AnthropicUsage{
		{InputTokens: 1000, OutputTokens: 50},
		{InputTokens: 180, OutputTokens: 25, CacheReadInputTokens: 900},
		{InputTokens: 200, OutputTokens: 40, CacheReadInputTokens: 1000},
		{InputTokens: 150, OutputTokens: 30, CacheReadInputTokens: 1200, CacheCreationInputTokens: 100},
		{InputTokens: 120, OutputTokens: 20, CacheReadInputTokens: 1300},
	}
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "I'll create hello.txt first.", Usage: usages[0], ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": hello, "content": "hello from the scripted model\nsecond line ünïcødé\n"}}}},
		// Claude Code refuses to edit a file the model has not read.
		{Usage: usages[1], ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Read", Input: map[string]any{"file_path": readme}}}},
		{Usage: usages[2], ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Edit", Input: map[string]any{"file_path": readme, "old_string": "Greeting: hello", "new_string": "Greeting: hello, world"}}}},
		{Text: "Checking the tree.", Usage: usages[3], ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "git status --short && wc -l hello.txt", "description": "Show changed files"}}}},
		{Text: "Created hello.txt and updated the README greeting.", Usage: usages[4]},
	}})
	h := harness.NewClaudeCode(bin)
	prompt := "Create hello.txt and update the README greeting. (prompt marker 7f3a)"
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: prompt, Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "execute")
	claudeLogRun(t, run, srv)
	if run.err != nil {
		t.Fatalf("claude exited with %v; stderr:\n%s", run.err, run.stderr)
	}
	if len(run.parseErrs) > 0 {
		t.Fatalf("%d of %d lines did not parse, first: %v", len(run.parseErrs), len(run.lines), run.parseErrs[0])
	}

	// The files on disk.
	if b, err := os.ReadFile(hello); err != nil || string(b) != "hello from the scripted model\nsecond line ünïcødé\n" {
		t.Errorf("hello.txt = %q, %v; want the Write tool's content", b, err)
	}
	if b, err := os.ReadFile(readme); err != nil || string(b) != "# demo\n\nGreeting: hello, world\n" {
		t.Errorf("README.md = %q, %v; want the Edit applied", b, err)
	}
	if st := claudeGitStatus(t, repo); st != " M README.md\n?? hello.txt\n" {
		t.Errorf("git status = %q", st)
	}

	// What the model saw: the prompt (sent on stdin), every tool's result,
	// and Bash really ran.
	reqs := srv.ScriptedRequests()
	if len(reqs) != 5 || srv.Exhausted() != 0 {
		t.Fatalf("served %d scripted requests and %d past the script; want 5 and 0", len(reqs), srv.Exhausted())
	}
	if !strings.Contains(reqs[0].UserText(), "prompt marker 7f3a") {
		t.Errorf("the first request does not carry the prompt")
	}
	for i, r := range reqs[1:] {
		res := r.ToolResults()
		if len(res) != 1 || res[0].IsError {
			t.Errorf("request %d: tool results %+v; want one success", i+1, res)
		}
	}
	if res := reqs[2].ToolResults(); len(res) == 1 && !strings.Contains(res[0].Text, "Greeting: hello") {
		t.Errorf("Read result %q does not show README.md", res[0].Text)
	}
	if res := reqs[4].ToolResults(); len(res) == 1 && !(strings.Contains(res[0].Text, "?? hello.txt") && strings.Contains(res[0].Text, "2 hello.txt")) {
		t.Errorf("Bash result %q does not show git status and wc output", res[0].Text)
	}

	// The events.
	sess := run.ofType(harness.EventSession)
	if len(sess) != 1 || !claudeUUIDRE.MatchString(sess[0].SessionID) {
		t.Fatalf("session events %+v; want one with a UUID", sess)
	}
	if got := run.types()[0]; got != harness.EventSession {
		t.Errorf("first event is %s, want session", got)
	}
	var tools []string
	for _, e := range run.ofType(harness.EventToolUse) {
		tools = append(tools, e.Tool)
		if e.Tool != "Bash" && !strings.Contains(e.ToolInput, `"file_path":"`+repo) {
			t.Errorf("%s input %s has no file_path", e.Tool, e.ToolInput)
		}
	}
	if strings.Join(tools, ",") != "Write,Read,Edit,Bash" {
		t.Errorf("tool uses %v, want Write, Read, Edit, Bash", tools)
	}
	starts, finishes := run.ofType(harness.EventStepStart), run.ofType(harness.EventStepFinish)
	if len(starts) != 5 || len(finishes) != 5 {
		t.Fatalf("%d step starts and %d finishes, want 5 each", len(starts), len(finishes))
	}
	for i, f := range finishes {
		u := usages[i]
		want := harness.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens}
		if f.Tokens != want {
			t.Errorf("step %d tokens %+v, want %+v", i, f.Tokens, want)
		}
	}
	sum := run.stepSum()
	texts := run.ofType(harness.EventText)
	if len(texts) != 3 || texts[2].Text != "Created hello.txt and updated the README greeting." {
		t.Errorf("text events %+v", texts)
	}
	results := run.ofType(harness.EventResult)
	if len(results) != 1 || run.events[len(run.events)-1].Type != harness.EventResult {
		t.Fatalf("want exactly one result event, last; got %v", run.types())
	}
	res := results[0]
	if res.Text != "Created hello.txt and updated the README greeting." || res.SessionID != sess[0].SessionID {
		t.Errorf("result %+v", res)
	}
	if res.Tokens != sum {
		t.Errorf("result tokens %+v, want the sum of the steps %+v", res.Tokens, sum)
	}
	// The cost is the CLI's own, from its price table for the scripted
	// model ($3/M input, $15/M output, $0.30/M cache read, $3.75/M cache
	// write for Sonnet 4.5).
	if !res.CostIsTotal || res.CostUSD <= 0 {
		t.Fatalf("result cost %v (total %v); want a positive total", res.CostUSD, res.CostIsTotal)
	}
	want := (float64(sum.Input)*3 + float64(sum.Output)*15 + float64(sum.CacheRead)*0.30 + float64(sum.CacheWrite)*3.75) / 1e6
	if !claudeSameCost(res.CostUSD, want) {
		t.Errorf("result cost %.9f, want %.9f from the scripted usage", res.CostUSD, want)
	}
	if len(run.ofType(harness.EventError)) != 0 || len(run.ofType(harness.EventStall)) != 0 {
		t.Errorf("unexpected error or stall events")
	}
}

// TestClaudeCodeReadOnly is a plan-mode run: the model tries to write a
// file and to change the tree through Bash, and only reads. Nothing may
// change, the denied Bash call must show as a stall, and the edit tools
// must not even be offered.
func TestClaudeCodeReadOnly(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	plan := "## Plan\n\n1. Change the greeting in README.md.\n2. Add hello.txt."
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Let me look around.", Usage: modeltest.AnthropicUsage{InputTokens: 900, OutputTokens: 30}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "cat README.md && git status", "description": "Show the readme"}}}},
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 30}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Write", Input: map[string]any{"file_path": filepath.Join(repo, "hello.txt"), "content": "nope\n"}}}},
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 30}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "echo nope > hello.txt; touch other.txt", "description": "Create files"}}}},
		{Text: plan, Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 80}},
	}})
	h := harness.NewClaudeCode(bin)
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: "Plan the greeting change. Change nothing.",
		Model: modeltest.AnthropicModelID, Env: claudeEnv(t.TempDir(), srv), ReadOnly: true}, "readonly")
	claudeLogRun(t, run, srv)
	if run.err != nil {
		t.Fatalf("claude exited with %v", run.err)
	}
	if len(run.parseErrs) > 0 {
		t.Fatalf("parse errors: %v", run.parseErrs)
	}
	if st := claudeGitStatus(t, repo); st != "" {
		t.Fatalf("read-only run changed the tree:\n%s", st)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 4 {
		t.Fatalf("served %d scripted requests, want 4", len(reqs))
	}
	for _, name := range reqs[0].Tools {
		switch name {
		case "Write", "Edit", "MultiEdit", "NotebookEdit":
			t.Errorf("read-only run offers the %s tool", name)
		}
	}
	if res := reqs[1].ToolResults(); len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Text, "Greeting: hello") {
		t.Errorf("read-only Bash result %+v; want the README", res)
	}
	if res := reqs[2].ToolResults(); len(res) != 1 || !res[0].IsError {
		t.Errorf("Write result %+v; want an error", res)
	}
	stalls := run.ofType(harness.EventStall)
	if len(stalls) != 1 || stalls[0].Tool != "Bash" || !strings.Contains(stalls[0].Text, "denied") {
		t.Errorf("stall events %+v; want one for the denied Bash call", stalls)
	}
	res := run.ofType(harness.EventResult)
	if len(res) != 1 || res[0].Text != plan || !claudeSameCost(res[0].CostUSD, (1200*3+170*15)/1e6) {
		t.Fatalf("result events %+v; want the plan with its cost", res)
	}
	// The rejected Write's step still counts its output: its tool result
	// is printed before the message's usage.
	if sum := run.stepSum(); sum != res[0].Tokens || sum.Output != 170 {
		t.Errorf("steps add up to %+v, the result says %+v", sum, res[0].Tokens)
	}
}

// TestClaudeCodeResume continues a session: the second run, given the
// first run's session id, must send the model the first conversation and
// report the same session.
func TestClaudeCodeResume(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	home := t.TempDir()
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "First answer: the greeting is hello.", Usage: modeltest.AnthropicUsage{InputTokens: 500, OutputTokens: 10}},
		{Text: "Second answer, with the first in mind.", Usage: modeltest.AnthropicUsage{InputTokens: 600, OutputTokens: 12}},
	}})
	h := harness.NewClaudeCode(bin)
	first := runClaude(t, h, harness.Request{Dir: repo, Prompt: "What is the greeting? (first prompt)",
		Model: modeltest.AnthropicModelID, Env: claudeEnv(home, srv)}, "")
	if first.err != nil {
		t.Fatalf("first run: %v\n%s", first.err, first.stderr)
	}
	sess := first.ofType(harness.EventSession)
	if len(sess) != 1 {
		t.Fatalf("first run: session events %+v", sess)
	}
	second := runClaude(t, h, harness.Request{Dir: repo, Prompt: "And now? (second prompt)",
		Model: modeltest.AnthropicModelID, Env: claudeEnv(home, srv), SessionID: sess[0].SessionID}, "resume")
	claudeLogRun(t, second, srv)
	if second.err != nil {
		t.Fatalf("second run: %v\n%s", second.err, second.stderr)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 2 {
		t.Fatalf("served %d scripted requests, want 2", len(reqs))
	}
	if got := reqs[1].UserText(); !strings.Contains(got, "(first prompt)") || !strings.Contains(got, "(second prompt)") {
		t.Errorf("the resumed request does not carry both prompts")
	}
	var sawFirstAnswer bool
	for _, m := range reqs[1].Messages {
		for _, b := range m.Blocks {
			if m.Role == "assistant" && strings.Contains(b.Text, "First answer") {
				sawFirstAnswer = true
			}
		}
	}
	if !sawFirstAnswer {
		t.Errorf("the resumed request does not carry the first answer")
	}
	res := second.ofType(harness.EventResult)
	if len(res) != 1 || res[0].SessionID != sess[0].SessionID || res[0].Text != "Second answer, with the first in mind." {
		t.Fatalf("second run's result %+v; want session %s", res, sess[0].SessionID)
	}
	// Each run reports its own cost: the CLI's total_cost_usd of the
	// resumed run would count the first run again.
	if c := first.ofType(harness.EventResult)[0].CostUSD; !claudeSameCost(c, (500*3+10*15)/1e6) {
		t.Errorf("first run cost %v", c)
	}
	if !claudeSameCost(res[0].CostUSD, (600*3+12*15)/1e6) {
		t.Errorf("second run cost %v, want its own turn's %v", res[0].CostUSD, (600*3+12*15)/1e6)
	}
}

// TestClaudeCodeAPIError: the API refuses the second request (403 is not
// retried; Claude Code retries 400, 401, 429 and 5xx with other settings
// or back-off). The run must end with an error event and a result that
// keeps the cost of the first turn, and a non-zero exit.
func TestClaudeCodeAPIError(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 2000, OutputTokens: 20}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "git status --short", "description": "Show status"}}}},
		{Error: &modeltest.AnthropicError{Status: 403, Message: "scripted refusal 9c1d"}},
	}})
	h := harness.NewClaudeCode(bin)
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: "Do it.", Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "api_error")
	claudeLogRun(t, run, srv)
	if len(run.parseErrs) > 0 {
		t.Fatalf("parse errors: %v", run.parseErrs)
	}
	var exit *exec.ExitError
	if !errors.As(run.err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("exit %v; want a non-zero exit status", run.err)
	}
	if srv.Served() != 2 || srv.Exhausted() != 0 {
		t.Errorf("served %d turns and %d past the script; want 2 and 0", srv.Served(), srv.Exhausted())
	}
	errs := run.ofType(harness.EventError)
	if len(errs) != 1 || !strings.Contains(errs[0].Text, "403 scripted refusal 9c1d") {
		t.Errorf("error events %+v; want the API's message", errs)
	}
	res := run.ofType(harness.EventResult)
	if len(res) != 1 || !claudeSameCost(res[0].CostUSD, (2000*3+20*15)/1e6) {
		t.Errorf("result events %+v; want one with the first turn's cost", res)
	}
}

// TestClaudeCodeMaxTurns stops the agent after one turn.
func TestClaudeCodeMaxTurns(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "git log --oneline", "description": "Show history"}}}},
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": "git status", "description": "Show status"}}}},
		{Text: "never reached", Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}},
	}})
	h := harness.NewClaudeCode(bin)
	h.MaxTurns = 1
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: "Look around.", Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "max_turns")
	claudeLogRun(t, run, srv)
	if len(run.parseErrs) > 0 {
		t.Fatalf("parse errors: %v", run.parseErrs)
	}
	errs := run.ofType(harness.EventError)
	if len(errs) != 1 || !strings.Contains(errs[0].Text, "max_turns") {
		t.Errorf("error events %+v; want error_max_turns", errs)
	}
	res := run.ofType(harness.EventResult)
	if len(res) != 1 || res[0].CostUSD <= 0 {
		t.Errorf("result events %+v; want one with the cost so far", res)
	}
}

// TestClaudeCodeLongPrompt sends a prompt larger than one argv string may
// be (MAX_ARG_STRLEN, 128 KiB on Linux): it must reach the model whole.
func TestClaudeCodeLongPrompt(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Read it all.", Usage: modeltest.AnthropicUsage{InputTokens: 60000, OutputTokens: 5}},
	}})
	var b strings.Builder
	b.WriteString("BEGIN-OF-PROMPT\n")
	for i := 0; b.Len() < 200<<10; i++ {
		b.WriteString("Issue comment line with some context about the change to make.\n")
	}
	b.WriteString("END-OF-PROMPT")
	h := harness.NewClaudeCode(bin)
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: b.String(), Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "")
	if run.err != nil {
		t.Fatalf("claude exited with %v\n%s", run.err, run.stderr)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 1 {
		t.Fatalf("served %d scripted requests, want 1", len(reqs))
	}
	got := reqs[0].UserText()
	if !strings.Contains(got, "BEGIN-OF-PROMPT") || !strings.Contains(got, "END-OF-PROMPT") || len(got) < 200<<10 {
		t.Errorf("the model got %d bytes of a %d byte prompt", len(got), b.Len())
	}
}

// TestClaudeCodeMaxBudget lets the CLI stop itself once its cost passes
// MaxBudgetUSD: the first turn costs $0.0165, the budget is one cent.
func TestClaudeCodeMaxBudget(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	turn := modeltest.AnthropicTurn{Usage: modeltest.AnthropicUsage{InputTokens: 5000, OutputTokens: 100}, ToolUses: []modeltest.AnthropicToolUse{
		{Name: "Bash", Input: map[string]any{"command": "git status --short", "description": "Show status"}}}}
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{turn, turn, turn,
		{Text: "done", Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 5}}}})
	h := harness.NewClaudeCode(bin)
	h.MaxBudgetUSD = 0.01
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: "Loop.", Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "max_budget")
	claudeLogRun(t, run, srv)
	if len(run.parseErrs) > 0 {
		t.Fatalf("parse errors: %v", run.parseErrs)
	}
	if srv.Served() >= 4 {
		t.Errorf("served all %d turns; the budget did not stop the agent", srv.Served())
	}
	errs := run.ofType(harness.EventError)
	if len(errs) != 1 || !strings.Contains(errs[0].Text, "budget") {
		t.Errorf("error events %+v; want one about the budget", errs)
	}
	res := run.ofType(harness.EventResult)
	if len(res) != 1 || res[0].CostUSD < 0.01 {
		t.Errorf("result events %+v; want one with the cost past the budget", res)
	}
}

// TestClaudeCodeMCPHelperProcess is not a test: run by Claude Code as an
// MCP server (stdio, newline-delimited JSON-RPC) for TestClaudeCodeMCP. Its
// one tool, stamp, answers "stamped:<word>".
func TestClaudeCodeMCPHelperProcess(t *testing.T) {
	t.Parallel()
	if os.Getenv("CLAUDE_MCP_HELPER") != "1" {
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req struct {
			ID     *json.RawMessage `json:"id"`
			Method string           `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Word string `json:"word"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue // notifications need no answer
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "marker", "version": "1.0.0"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "stamp", "description": "Stamps a word.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}, "required": []string{"word"}}}}}
		case "tools/call":
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "stamped:" + req.Params.Arguments.Word}}}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no method " + req.Method}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	os.Exit(0)
}

// TestClaudeCodeMCP gives the agent an MCP server through MCPConfig (the
// JSON text the harness factory renders from .sandbox.yml) and has the
// model call its tool.
func TestClaudeCodeMCP(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "claude")
	repo := claudeGitRepo(t)
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "mcp__marker__stamp", Input: map[string]any{"word": "zebra"}}}},
		{Text: "Stamped.", Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 5}},
	}})
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"marker": map[string]any{
		"command": os.Args[0], "args": []string{"-test.run=^TestClaudeCodeMCPHelperProcess$"},
		"env": map[string]string{"CLAUDE_MCP_HELPER": "1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := harness.NewClaudeCode(bin)
	h.MCPConfig = string(cfg)
	run := runClaude(t, h, harness.Request{Dir: repo, Prompt: "Stamp zebra.", Model: modeltest.AnthropicModelID,
		Env: claudeEnv(t.TempDir(), srv)}, "")
	claudeLogRun(t, run, srv)
	if run.err != nil || len(run.parseErrs) > 0 {
		t.Fatalf("exit %v, parse errors %v", run.err, run.parseErrs)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 2 {
		t.Fatalf("served %d scripted requests, want 2", len(reqs))
	}
	res := reqs[1].ToolResults()
	if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Text, "stamped:zebra") {
		t.Errorf("MCP tool result %+v; want the server's answer", res)
	}
	var init struct {
		MCPServers []struct{ Name, Status string } `json:"mcp_servers"`
	}
	if err := json.Unmarshal(run.lines[0], &init); err != nil || len(init.MCPServers) != 1 || init.MCPServers[0].Name != "marker" || init.MCPServers[0].Status != "connected" {
		t.Errorf("init line's MCP servers %+v (%v); want marker connected", init.MCPServers, err)
	}
}
