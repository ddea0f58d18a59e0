package gateway_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// These tests run the real agent CLIs through the runner with the model
// gateway between them and the scripted model: the model server must get
// the provider key, and the agent's environment and files must not hold
// it. The agent itself dumps its environment (and its parent's, from
// /proc) with a shell tool call; the dump reaches the scripted model as
// the tool's result, where the test reads it.

const agentDump = `env | sort; echo "== parent"; tr '\0' '\n' < /proc/$PPID/environ | sort; ` +
	`for f in "$OPENCODE_CONFIG" "$HOME"/.config/opencode/* "$HOME"/.claude.json; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; echo "== end of dump"`

// agentTriesFiles is the agent's try at the provider's files API through
// the gateway, with the key the gateway adds and an organisation of its
// choosing: the gateway's 403 reaches the model as the tool's result.
func agentTriesFiles(provider, path string) string {
	return `; echo "== files"; curl -sS -X POST -H 'OpenAI-Organization: org-agent' -H 'Content-Type: application/json' -d '{}' "$` +
		dispatch.EnvModelGateway + `/` + provider + path + `"`
}

func serveGateway(t *testing.T, providers ...dispatch.GatewayProvider) map[string]string {
	t.Helper()
	cfg := dispatch.GatewayConfig{Providers: providers}
	g, err := gateway.New(cfg, gateway.Options{Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := gateway.Serve(ctx, g, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s.Env(cfg)
}

type buf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buf) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buf) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

type agentRun struct {
	home, work, state, out string
	opts                   runner.Options
	log                    *buf
}

func newAgentRun(t *testing.T, gw map[string]string, extra ...string) *agentRun {
	t.Helper()
	r := &agentRun{home: t.TempDir(), work: t.TempDir(), state: t.TempDir(), out: filepath.Join(t.TempDir(), "out"), log: &buf{}}
	env := runtest.HermeticEnv(r.home)
	for k, v := range gw {
		env = append(env, k+"="+v)
	}
	r.opts = runner.Options{
		Environ: append(env, extra...), Progress: &buf{}, Log: r.log,
		WorkDir: r.work, StateDir: r.state, KillGrace: 2 * time.Second, StartupGrace: 5 * time.Minute,
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("GATEWAY_TEST_LOG") != "" {
			t.Logf("runner log:\n%s", r.log.String())
		}
	})
	return r
}

func (r *agentRun) run(t *testing.T, mode dispatch.Mode, cfg sandboxcfg.Config) *dispatch.Result {
	t.Helper()
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	o := dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-6A7E3A11", Mode: mode, Attempt: 1,
		Repo: "acme/demo", Number: 3, CloneURL: remote.URL, BaseBranch: "main",
		TargetBranch: dispatch.BranchName("T-6A7E3A11", "Dump"),
		Task:         dispatch.TaskText{Title: "Dump", Body: "Show your environment."},
		Plan:         "1. Dump the environment.", Config: sandboxcfg.MustResolve(cfg), BudgetUSD: 5, OutputDir: r.out,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	return runner.Run(ctx, o, r.opts)
}

// noKeyIn fails when any file under the run's directories, or the dump,
// holds the key; the dump must be complete to count.
func (r *agentRun) noKeyIn(t *testing.T, key, dump string, mustShow ...string) {
	t.Helper()
	if !strings.Contains(dump, "== end of dump") {
		t.Fatalf("the agent's dump did not run to its end:\n%s", dump)
	}
	for _, s := range mustShow {
		if !strings.Contains(dump, s) {
			t.Errorf("the agent's dump does not show %q:\n%s", s, dump)
		}
	}
	if strings.Contains(dump, key) {
		t.Errorf("the agent's environment or config files hold the provider key:\n%s", dump)
	}
	for _, root := range []string{r.home, r.work, r.state, r.out} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(key)) {
					t.Errorf("%s holds the provider key", p)
				}
			}
			return nil
		})
	}
}

// OpenCode's provider is re-addressed to the gateway: the operator's file
// names a base URL that does not answer and no key at all, so only the
// gateway can have carried the request, and only it added the key.
func TestOpenCodeThroughTheGateway(t *testing.T) {
	testenv.Long(t, "runs the real OpenCode CLI")
	t.Parallel()
	const key = "sk-canary-opencode-gateway-5f1e9a"
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": agentDump + agentTriesFiles(modeltest.ProviderID, "/files"), "description": "dump"}}}, Usage: modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}},
		{Text: "1. Nothing to change.", Usage: modeltest.Usage{PromptTokens: 200, CompletionTokens: 10}},
	})
	gw := serveGateway(t, dispatch.GatewayProvider{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: key})

	r := newAgentRun(t, gw, dispatch.EnvOpenCodeConfigJSON+"="+srv.OpenCodeConfigBehindGateway())
	r.opts.Bins = harness.Bins{OpenCode: bin}

	res := r.run(t, dispatch.ModePlan, sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel()})
	if res.Status != dispatch.StatusCompleted {
		t.Fatalf("status %s: %+v", res.Status, res.Error)
	}
	if len(srv.ScriptedRequests()) != 2 {
		t.Fatalf("scripted turns served: %d of 2", len(srv.ScriptedRequests()))
	}
	srv.CheckCredential(t, key)
	results := srv.ScriptedRequests()[1].ToolResults()
	if len(results) != 1 {
		t.Fatalf("tool results: %q", results)
	}
	r.noKeyIn(t, key, results[0], dispatch.EnvModelGateway+"=", "OPENCODE_CONFIG_CONTENT=", dispatch.GatewayDummyKey, "== "+r.state,
		"model gateway: POST /files is not forwarded")
}

// Claude Code gets ANTHROPIC_BASE_URL at the gateway and a dummy key, even
// when its environment had a base URL and key of its own.
func TestClaudeCodeThroughTheGateway(t *testing.T) {
	testenv.Long(t, "runs the real Claude Code CLI")
	t.Parallel()
	const key = "sk-ant-canary-claude-gateway-7b2c4d"
	bin := testenv.NPMBin(t, "claude")
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{{Name: "Bash", Input: map[string]any{"command": agentDump + agentTriesFiles("anthropic", "/v1/files")}}}},
		{Text: "Nothing to change.", Usage: modeltest.AnthropicUsage{InputTokens: 200, OutputTokens: 10}},
	}})
	gw := serveGateway(t, dispatch.GatewayProvider{Name: "anthropic", BaseURL: srv.URL, API: dispatch.APIAnthropic, Key: key})
	r := newAgentRun(t, gw, "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "ANTHROPIC_API_KEY=sk-ant-not-the-gateways")
	r.opts.Bins = harness.Bins{ClaudeCode: bin}

	res := r.run(t, dispatch.ModeExecute, sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID})
	if res.Error != nil && strings.Contains(res.Error.Message, "127.0.0.1:1") {
		t.Fatalf("Claude Code used the environment's base URL: %+v", res.Error)
	}
	scripted := srv.ScriptedRequests()
	if len(scripted) < 2 {
		t.Fatalf("scripted turns served: %d of 2 (status %s %+v)", len(scripted), res.Status, res.Error)
	}
	srv.CheckCredential(t, key)
	// The Bash result comes back in whichever request follows it: on a
	// loaded machine Claude Code may send another request with tools in
	// between (and retry one it gave up on), so look for it, not at [1].
	var results []modeltest.AnthropicBlock
	for _, req := range scripted {
		if rs := req.ToolResults(); len(rs) > 0 {
			results = rs
			break
		}
	}
	if len(results) != 1 {
		for i, req := range scripted {
			t.Logf("scripted request %d: turn %d, %d messages, tools %v", i, req.Turn, len(req.Messages), req.Tools)
		}
		t.Fatalf("tool results: %+v", results)
	}
	r.noKeyIn(t, key, results[0].Text, "ANTHROPIC_BASE_URL="+gw[dispatch.EnvModelGateway]+"/anthropic", "ANTHROPIC_API_KEY="+dispatch.GatewayDummyKey,
		"model gateway: POST /v1/files is not forwarded")
}
