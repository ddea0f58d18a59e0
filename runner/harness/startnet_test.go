package harness_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The agent CLIs start without waiting on the network (issue 46): started
// as the runner starts them in a sandbox (the harness's own command line
// and settings, a fresh HOME, the run's own OpenCode database, the
// sandbox's proxy variables), each tries to reach nothing but its model
// before it exits. strace records every connect and every datagram sent
// to an IP address (a DNS query) by the CLI and its children; the proxy
// variables point at a loopback port nothing listens on, so a request that
// honours them is an attempt on that port, and one that does not is an
// attempt on its own host. A step that waits on the network at start (a
// model list download, a plugin install, an update check, telemetry, a
// name lookup) fails these tests, the way it would cost every sandbox its
// timeout or a refused connection.

// sandboxNetEnv is the proxy part of the sandbox's environment (the init's
// proxyEnv): everything but loopback goes to proxy.
func sandboxNetEnv(proxy string) []string {
	u := "http://" + proxy
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1"}
}

// satisfiedConfigDir is a ~/.config/opencode that needs no install:
// OpenCode installs @opencode-ai/plugin into its global config directory
// on every start unless the directory is not its to write (the sandbox
// image's, root's there; TestOpenCodeInTheImageInstallsNothingFromNPM in
// dispatch/docker) or already holds it. Tests run as root, who can write
// through any mode, so the directory here holds it.
func satisfiedConfigDir(t *testing.T, home string) {
	t.Helper()
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"package.json":      `{"dependencies":{"@opencode-ai/plugin":"*"}}`,
		"package-lock.json": `{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkout is a working clone of a one-file repository, as the agent's.
func checkout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	runtest.Git(t, "", "clone", "--quiet", runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"}).Dir, dir)
	return dir
}

// openCodeStart runs one read-only `opencode run` as a sandbox's runner
// would, plus extra, and returns its attempts other than the model's.
func openCodeStart(t *testing.T, extra ...string) []runtest.Connection {
	t.Helper()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{{Text: "1. Nothing to do."}, {Text: "Title"}})
	home := t.TempDir()
	satisfiedConfigDir(t, home)
	cfg, err := srv.WriteOpenCodeConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := append(runtest.HermeticEnv(home), "OPENCODE_CONFIG="+cfg,
		harness.EnvOpenCodeDB+"="+filepath.Join(t.TempDir(), "opencode.db"))
	env = append(append(env, sandboxNetEnv(runtest.DeadAddr(t))...), extra...)
	cmd, err := harness.NewOpenCode(bin).Command(harness.Request{Dir: checkout(t),
		Prompt: "Write a plan.", Model: srv.OpenCodeModel(), Env: env, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	conns, out := runtest.RecordConnections(t, cmd)
	if srv.Served() == 0 {
		t.Fatalf("opencode never reached the model:\n%s", out)
	}
	return runtest.Except(conns, srv.Addr())
}

func TestOpenCodeStartReachesOnlyTheModel(t *testing.T) {
	testenv.Long(t, "runs the real OpenCode CLI under strace")
	if other := openCodeStart(t); len(other) > 0 {
		t.Fatalf("opencode, started as in a sandbox, tried to reach %d addresses besides the model (each is a wait or a failure at every start in a sandbox):\n%v", len(other), other)
	}
}

// The control: the same start with OpenCode's model list download let
// back on is seen trying the proxy, so the recorder sees what the test
// above asserts is absent.
func TestOpenCodeStartRecorderSeesADownload(t *testing.T) {
	testenv.Long(t, "runs the real OpenCode CLI under strace")
	other := openCodeStart(t, "OPENCODE_DISABLE_MODELS_FETCH=0")
	if len(other) == 0 {
		t.Fatal("with the model list download on, no attempt besides the model was recorded: the recorder misses what TestOpenCodeStartReachesOnlyTheModel asserts is absent")
	}
	t.Logf("with the model list download on: %v", other)
}

func TestClaudeCodeStartReachesOnlyTheModel(t *testing.T) {
	testenv.Long(t, "runs the real Claude Code CLI under strace")
	bin := testenv.NPMBin(t, "claude")
	srv := modeltest.StartAnthropic(t, modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{{Text: "1. Nothing to do."}}})
	env := append(append(runtest.HermeticEnv(t.TempDir()), srv.Env()...), sandboxNetEnv(runtest.DeadAddr(t))...)
	cmd, err := harness.NewClaudeCode(bin).Command(harness.Request{Dir: checkout(t),
		Prompt: "Write a plan.", Model: modeltest.AnthropicModelID, Env: env, ReadOnly: true, BudgetUSD: 1})
	if err != nil {
		t.Fatal(err)
	}
	conns, out := runtest.RecordConnections(t, cmd)
	if srv.Served() == 0 {
		t.Fatalf("claude never reached the model:\n%s", out)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if other := runtest.Except(conns, u.Host); len(other) > 0 {
		t.Fatalf("claude, started as in a sandbox, tried to reach %d addresses besides the model:\n%v\n%s", len(other), other, strings.TrimSpace(out))
	}
}
