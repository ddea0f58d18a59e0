package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

var updateOpenCode = flag.Bool("update-opencode", false, "rewrite testdata/opencode/*.jsonl from real runs")

// openCodeEnv is a hermetic environment for the real CLI: its own home (so
// sessions and caches never touch the developer's), the scripted provider.
func openCodeEnv(t *testing.T, srv *modeltest.Server) []string {
	t.Helper()
	home := t.TempDir()
	cfg, err := srv.WriteOpenCodeConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"OPENCODE_CONFIG="+cfg,
	)
}

type openCodeRun struct {
	stdout, stderr []byte
	events         []harness.Event
	parseErrors    int
}

func runOpenCode(t *testing.T, h *harness.OpenCode, req harness.Request) openCodeRun {
	t.Helper()
	cmd, err := h.Command(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("opencode did not finish in time; stderr:\n%s", stderr.String())
	}
	run := openCodeRun{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	p := h.NewParser()
	sc := bufio.NewScanner(bytes.NewReader(run.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		evs, perr := p.ParseStdout(sc.Bytes())
		if perr != nil {
			run.parseErrors++
			t.Logf("parse error: %v", perr)
		}
		run.events = append(run.events, evs...)
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		run.events = append(run.events, p.ParseStderr([]byte(line))...)
	}
	if err != nil {
		t.Logf("opencode exited with %v; stderr:\n%s", err, stderr.String())
	}
	return run
}

func record(t *testing.T, name string, data []byte) {
	t.Helper()
	if !*updateOpenCode {
		return
	}
	if err := os.WriteFile(filepath.Join("testdata", "opencode", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func countType(evs []harness.Event, typ harness.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestOpenCodeHarnessRealCLI runs the real opencode through the harness: the
// scripted write lands on disk, and the real event stream parses into the
// session, steps with tokens and cost, the tool call and the final text.
// A second invocation continues the same session.
func TestOpenCodeHarnessRealCLI(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{
		{Text: "Writing the file.", ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "hello.txt", "content": "hello\n"}}}, Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 100}},
		{Text: "Done: hello.txt exists.", Usage: modeltest.Usage{PromptTokens: 1200, CompletionTokens: 20}},
		{Text: "Still here, same session.", Usage: modeltest.Usage{PromptTokens: 1300, CompletionTokens: 10}},
	})
	env := openCodeEnv(t, srv)
	dir := t.TempDir()
	h := harness.NewOpenCode(bin)
	run := runOpenCode(t, h, harness.Request{Dir: dir, Prompt: "write hello.txt", Model: srv.OpenCodeModel(), Env: env})
	record(t, "write.jsonl", run.stdout)

	if b, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("hello.txt = %q, %v; want the scripted content", b, err)
	}
	if run.parseErrors != 0 {
		t.Fatalf("%d parse errors on the real stream", run.parseErrors)
	}
	if got := countType(run.events, harness.EventStepFinish); got != 2 {
		t.Fatalf("step_finish events = %d, want 2", got)
	}
	var session string
	var cost float64
	var tokens harness.Tokens
	var tool, toolInput, last string
	for _, e := range run.events {
		switch e.Type {
		case harness.EventSession:
			session = e.SessionID
		case harness.EventStepFinish:
			cost += e.CostUSD
			tokens.Input += e.Tokens.Input
			tokens.Output += e.Tokens.Output
		case harness.EventToolUse:
			tool, toolInput = e.Tool, e.ToolInput
		case harness.EventText:
			last = e.Text
		}
	}
	if !strings.HasPrefix(session, "ses_") {
		t.Fatalf("session id = %q", session)
	}
	if tokens.Input != 2200 || tokens.Output != 120 {
		t.Fatalf("tokens = %+v, want the scripted usage (2200 in, 120 out)", tokens)
	}
	// Prices are $3/M input and $15/M output.
	want := (2200*modeltest.InputPricePerM + 120*modeltest.OutputPricePerM) / 1e6
	if diff := cost - want; diff > 1e-9 || diff < -1e-9 {
		t.Fatalf("cost = %v, want %v", cost, want)
	}
	if tool != "write" || !strings.Contains(toolInput, `"filePath":"hello.txt"`) {
		t.Fatalf("tool use = %s %s", tool, toolInput)
	}
	if last != "Done: hello.txt exists." {
		t.Fatalf("last text = %q", last)
	}

	again := runOpenCode(t, h, harness.Request{Dir: dir, Prompt: "are you there?", Model: srv.OpenCodeModel(), Env: env, SessionID: session})
	reqs := srv.ScriptedRequests()
	if len(reqs) != 3 {
		t.Fatalf("scripted requests = %d, want 3", len(reqs))
	}
	// The continued session sends the earlier conversation back.
	if msgs := reqs[2].Messages; len(msgs) < 5 || !strings.Contains(msgs[len(msgs)-1].Content, "are you there?") {
		t.Fatalf("continued request does not carry the session history: %+v", msgs)
	}
	for _, e := range again.events {
		if e.SessionID != "" && e.SessionID != session {
			t.Fatalf("continued run used session %s, want %s", e.SessionID, session)
		}
	}
}

// TestOpenCodeHarnessStall: a write outside the project needs approval,
// which `opencode run` auto-rejects; the parser reports the stall from
// stderr and the failed tool call from stdout.
func TestOpenCodeHarnessStall(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "opencode")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	srv := modeltest.Start(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": outside, "content": "x"}}}, Usage: modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}},
	})
	run := runOpenCode(t, harness.NewOpenCode(bin), harness.Request{Dir: t.TempDir(), Prompt: "write outside", Model: srv.OpenCodeModel(), Env: openCodeEnv(t, srv)})
	record(t, "rejected.jsonl", run.stdout)
	record(t, "rejected.stderr", run.stderr)
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("the write outside the project was not rejected")
	}
	var stall, toolErr string
	for _, e := range run.events {
		if e.Type == harness.EventStall {
			stall = e.Text
		}
		if e.Type == harness.EventToolUse {
			toolErr = e.Text
		}
	}
	if !strings.Contains(stall, "external_directory") {
		t.Fatalf("stall = %q, want the external_directory rejection", stall)
	}
	if !strings.Contains(toolErr, "rejected") {
		t.Fatalf("tool error = %q", toolErr)
	}
}

// TestOpenCodeHarnessReadOnly: plan mode takes the edit tools away.
func TestOpenCodeHarnessReadOnly(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "x.txt", "content": "x"}}}},
		{Text: "## Plan\n1. nothing"},
	})
	dir := t.TempDir()
	run := runOpenCode(t, harness.NewOpenCode(bin), harness.Request{Dir: dir, Prompt: "plan", Model: srv.OpenCodeModel(), Env: openCodeEnv(t, srv), ReadOnly: true})
	record(t, "readonly.jsonl", run.stdout)
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); err == nil {
		t.Fatal("read-only run wrote a file")
	}
	for _, name := range srv.ScriptedRequests()[0].Tools {
		if name == "write" || name == "edit" {
			t.Fatalf("read-only run offered the %s tool", name)
		}
	}
}

// TestOpenCodeHarnessAPIError: a provider error becomes an error event.
func TestOpenCodeHarnessAPIError(t *testing.T) {
	t.Parallel()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{{Status: 400}})
	run := runOpenCode(t, harness.NewOpenCode(bin), harness.Request{Dir: t.TempDir(), Prompt: "x", Model: srv.OpenCodeModel(), Env: openCodeEnv(t, srv)})
	record(t, "api-error.jsonl", run.stdout)
	if countType(run.events, harness.EventError) != 1 {
		t.Fatalf("events = %+v, want one error", run.events)
	}
}
