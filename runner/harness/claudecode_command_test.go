package harness_test

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

func TestClaudeCodeCommand(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-api03-SECRET-never-in-argv"
	env := []string{"PATH=/usr/bin", "HOME=/home/sandbox", "ANTHROPIC_API_KEY=" + key, "DISABLE_TELEMETRY=0"}
	base := []string{"-p", "--output-format=stream-json", "--verbose", "--include-partial-messages"}
	mcpFile := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(mcpFile, []byte(`{"mcpServers":{"docs":{"type":"http","url":"http://docs"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		h       func() *harness.ClaudeCode
		req     harness.Request
		args    []string // after base
		wantErr string
	}{
		{
			name: "execute",
			req:  harness.Request{Dir: "/work/repo", Prompt: "Implement the plan.", Model: "claude-sonnet-4-5"},
			args: []string{"--model=claude-sonnet-4-5", "--permission-mode=acceptEdits", "--allowed-tools=Bash", "--permission-prompts=none"},
		},
		{
			name: "read-only plan",
			req:  harness.Request{Dir: "/work/repo", Prompt: "Plan.", ReadOnly: true},
			args: []string{"--permission-mode=default", "--disallowed-tools=Write,Edit,MultiEdit,NotebookEdit", "--permission-prompts=none"},
		},
		{
			name: "resume with a session id that looks like a flag",
			req:  harness.Request{Dir: "/work/repo", Prompt: "Fix the tests.", SessionID: "--dangerously-skip-permissions"},
			args: []string{"--resume=--dangerously-skip-permissions", "--permission-mode=acceptEdits", "--allowed-tools=Bash", "--permission-prompts=none"},
		},
		{
			name: "limits and MCP servers",
			h: func() *harness.ClaudeCode {
				h := harness.NewClaudeCode("/opt/claude")
				h.MaxTurns, h.MaxBudgetUSD, h.MCPConfig = 40, 2.5, `{"mcpServers":{}}`
				return h
			},
			req: harness.Request{Dir: "/work/repo", Prompt: "Go."},
			args: []string{"--permission-mode=acceptEdits", "--allowed-tools=Bash", "--permission-prompts=none",
				"--max-turns=40", "--max-budget-usd=2.5", `--mcp-config={"mcpServers":{}}`, "--strict-mcp-config"},
		},
		{
			name: "what is left of the run's budget, when lower",
			h: func() *harness.ClaudeCode {
				h := harness.NewClaudeCode("/opt/claude")
				h.MaxBudgetUSD = 2.5
				return h
			},
			req:  harness.Request{Dir: "/work/repo", Prompt: "Go.", BudgetUSD: 0.75},
			args: []string{"--permission-mode=acceptEdits", "--allowed-tools=Bash", "--permission-prompts=none", "--max-budget-usd=0.75"},
		},
		{
			name: "the run's budget alone",
			req:  harness.Request{Dir: "/work/repo", Prompt: "Go.", BudgetUSD: 3},
			args: []string{"--permission-mode=acceptEdits", "--allowed-tools=Bash", "--permission-prompts=none", "--max-budget-usd=3"},
		},
		{
			name: "MCP servers are allowed",
			h: func() *harness.ClaudeCode {
				h := harness.NewClaudeCode("/opt/claude")
				h.MCPConfig = `{"mcpServers":{"docs":{"type":"http","url":"http://docs"},"my server.x":{"command":"srv"}}}`
				return h
			},
			req: harness.Request{Dir: "/work/repo", Prompt: "Go."},
			args: []string{"--permission-mode=acceptEdits", "--allowed-tools=Bash,mcp__docs,mcp__my_server_x", "--permission-prompts=none",
				`--mcp-config={"mcpServers":{"docs":{"type":"http","url":"http://docs"},"my server.x":{"command":"srv"}}}`, "--strict-mcp-config"},
		},
		{
			name: "MCP servers from a file, read-only",
			h: func() *harness.ClaudeCode {
				h := harness.NewClaudeCode("/opt/claude")
				h.MCPConfig = mcpFile
				return h
			},
			req: harness.Request{Dir: "/work/repo", Prompt: "Plan.", ReadOnly: true},
			args: []string{"--permission-mode=default", "--disallowed-tools=Write,Edit,MultiEdit,NotebookEdit", "--allowed-tools=mcp__docs",
				"--permission-prompts=none", "--mcp-config=" + mcpFile, "--strict-mcp-config"},
		},
		{name: "bad MCP config", h: func() *harness.ClaudeCode {
			h := harness.NewClaudeCode("/opt/claude")
			h.MCPConfig = `{"mcpServers":[]}`
			return h
		}, req: harness.Request{Dir: "/w", Prompt: "x"}, wantErr: "MCP config is not"},
		{name: "missing MCP config file", h: func() *harness.ClaudeCode {
			h := harness.NewClaudeCode("/opt/claude")
			h.MCPConfig = "/nonexistent/mcp.json"
			return h
		}, req: harness.Request{Dir: "/w", Prompt: "x"}, wantErr: "/nonexistent/mcp.json"},
		{name: "no binary", h: func() *harness.ClaudeCode { return harness.NewClaudeCode("") },
			req: harness.Request{Dir: "/w", Prompt: "x"}, wantErr: "no claude binary"},
		{name: "no prompt", req: harness.Request{Dir: "/w", Prompt: " \n"}, wantErr: "empty prompt"},
		{name: "no directory", req: harness.Request{Prompt: "x"}, wantErr: "no working directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.NewClaudeCode("/opt/claude")
			if tc.h != nil {
				h = tc.h()
			}
			if h.Name() != "claude-code" {
				t.Errorf("Name() = %q", h.Name())
			}
			tc.req.Env = env
			cmd, err := h.Command(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cmd.Path != "/opt/claude" || cmd.Dir != tc.req.Dir {
				t.Errorf("path %q dir %q", cmd.Path, cmd.Dir)
			}
			want := append(append([]string{"/opt/claude"}, base...), tc.args...)
			if !slices.Equal(cmd.Args, want) {
				t.Errorf("args\n got %q\nwant %q", cmd.Args, want)
			}
			// The prompt goes on stdin, never in argv; nor does the key.
			for _, a := range cmd.Args {
				if strings.Contains(a, tc.req.Prompt) || strings.Contains(a, key) {
					t.Errorf("argument %q carries the prompt or the API key", a)
				}
			}
			stdin, err := io.ReadAll(cmd.Stdin)
			if err != nil || string(stdin) != tc.req.Prompt {
				t.Errorf("stdin = %q, %v; want the prompt", stdin, err)
			}
			// The offline switches are added; what the caller set wins and
			// is not repeated.
			for _, kv := range []string{"DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"} {
				if !slices.Contains(cmd.Env, kv) {
					t.Errorf("env lacks %s", kv)
				}
			}
			var telemetry []string
			for _, kv := range cmd.Env {
				if strings.HasPrefix(kv, "DISABLE_TELEMETRY=") {
					telemetry = append(telemetry, kv)
				}
			}
			if !slices.Equal(telemetry, []string{"DISABLE_TELEMETRY=0"}) {
				t.Errorf("DISABLE_TELEMETRY entries %q, want only the caller's", telemetry)
			}
			if !slices.Equal(cmd.Env[:len(env)], env) {
				t.Errorf("the caller's environment is not kept as given")
			}
		})
	}
}

// TestClaudeCodeParsersAreIndependent: each process gets its own parser;
// one's open step must not leak into another's.
func TestClaudeCodeParsersAreIndependent(t *testing.T) {
	t.Parallel()
	h := harness.NewClaudeCode("claude")
	a, b := h.NewParser(), h.NewParser()
	line := []byte(`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3}},"session_id":"s"}`)
	if _, err := a.ParseStdout(line); err != nil {
		t.Fatal(err)
	}
	evs, err := b.ParseStdout([]byte(`{"type":"result","subtype":"success","result":"","total_cost_usd":0,"session_id":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := claudeSignature(evs); got != "result" {
		t.Errorf("second parser emitted %q; the first parser's open step leaked", got)
	}
}
