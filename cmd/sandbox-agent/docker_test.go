package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// dockerEnv is a hermetic environment that selects the real sandbox image
// under the caps profile (these hosts refuse privileged containers).
func dockerEnv(t *testing.T, img string) []string {
	return append(runtest.HermeticEnv(t.TempDir()), envImage+"="+img, envIsolation+"=caps")
}

// dockerDataDir is a data directory the inner daemon's root-owned files
// are removed from even when a test fails before the CLI cleans up.
func dockerDataDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sandbox-agent-docker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			_ = exec.Command("rm", "-rf", dir).Run()
		}
	})
	return dir
}

// The README's first command on a machine with Docker and the image: the
// local repository is served to the sandbox over HTTP with a fresh token,
// the plan and the execution run in containers, the branch is pushed into
// the local repository, and only the receipt is left behind.
func TestQuickstartOnDockerBackend(t *testing.T) {
	img := testenv.SandboxImage(t)
	t.Parallel()
	repo := filepath.Join(t.TempDir(), "calc")
	env := dockerEnv(t, img)
	if r := runCLIOn(t, nil, env, false, "", "quickstart", repo); r.code != exitOK {
		t.Fatalf("quickstart: exit %d", r.code)
	}
	data := dockerDataDir(t)
	r := runCLIOn(t, nil, env, false, "", "create", "--repo", repo, "--task", "Document add.sh", "--data-dir", data)
	for _, want := range []string{"docker sandbox " + img + ", isolation caps", "serving " + repo + " to the sandbox at http://host.docker.internal:", "/calc.git"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "WARNING: no sandbox") || strings.Contains(r.stderr, processWarning) {
		t.Fatal("the docker run printed the process backend's warning")
	}
	res := checkQuickstartRun(t, r, repo)
	if want := filepath.Join(data, "results", res.TaskID, "result.json"); receiptPath(t, r.stdout) != want {
		t.Fatalf("receipt at %s, want %s", receiptPath(t, r.stdout), want)
	}
	// Both runs' containers and task directories (the inner daemon's
	// files) are gone; the receipts stay.
	if ents, _ := os.ReadDir(filepath.Join(data, "tasks")); len(ents) != 0 {
		t.Fatalf("task directories left: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "results")); len(ents) != 2 {
		t.Fatalf("results = %v, want the plan's and the execution's", ents)
	}
	out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=org.sandbox-bot.data-dir="+data, "--format", "{{.Names}}").Output()
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("containers left: %s", out)
	}
}

// The operator's opencode.json reaches OpenCode inside the sandbox, and the
// key its {env:VAR} names travels as a redacted secret: the real OpenCode
// in the real image talks to the scripted model on the bridge gateway.
func TestDockerOpenCodeProviderConfig(t *testing.T) {
	img := testenv.SandboxImage(t)
	t.Parallel()
	const key = "sk-CANARY-provider-key-0123456789"
	model, err := modeltest.New(dockertest.Gateway(t)+":0", []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": `echo "key=$CORP_LLM_KEY"`, "description": "check the key"}}}, Usage: modeltest.Usage{PromptTokens: 900, CompletionTokens: 40}},
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "NOTES.md", "content": "# Notes\n\n`sh add.sh A B` prints A+B.\n"}}}, Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 90}},
		{Text: "Added NOTES.md.", Usage: modeltest.Usage{PromptTokens: 1100, CompletionTokens: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	cfg := model.OpenCodeConfig()
	cfg["provider"].(map[string]any)[modeltest.ProviderID].(map[string]any)["options"].(map[string]any)["apiKey"] = "{env:CORP_LLM_KEY}"
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(t.TempDir(), "opencode.json")
	os.WriteFile(cfgPath, raw, 0o600)

	repo := quickstart(t, map[string]string{".sandbox.yml": "harness: opencode\nmodel: " + model.OpenCodeModel() + "\nplan: { required: false }\nvalidate:\n  test: sh test.sh\n"})
	env := append(dockerEnv(t, img), "OPENCODE_CONFIG="+cfgPath, "CORP_LLM_KEY="+key, envHostAllow+"="+model.Addr())
	data := dockerDataDir(t)
	r := runCLIOn(t, nil, env, false, "", "create", "--backend", "docker", "--repo", repo, "--task", "Document add.sh", "--data-dir", data)
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	// The model saw the key in the agent's environment: it was passed.
	reqs := model.ScriptedRequests()
	if len(reqs) != 3 || len(reqs[1].ToolResults()) != 1 || !strings.Contains(reqs[1].ToolResults()[0], "key="+key) {
		t.Fatalf("the agent's environment lacked the key: %d requests", len(reqs))
	}
	bs := branches(t, repo)
	if len(bs) != 1 {
		t.Fatalf("branches = %v", bs)
	}
	if got := runtest.Git(t, repo, "show", bs[0]+":NOTES.md"); !strings.Contains(got, "prints A+B") {
		t.Fatalf("NOTES.md = %q", got)
	}
	path := receiptPath(t, r.stdout)
	res := readReceipt(t, path)
	if res.TokenUsage.Steps != 3 || res.TokenUsage.TotalCostUSD <= 0 || res.PRSummary != "Added NOTES.md." {
		t.Fatalf("receipt = %+v", res)
	}
	receipt, _ := os.ReadFile(path)
	for what, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "receipt": string(receipt)} {
		if strings.Contains(s, key) {
			t.Fatalf("the provider key shows in the %s", what)
		}
	}
}

// Which backend runs, and what the user is told when docker cannot.
func TestBackendChoice(t *testing.T) {
	t.Parallel()
	repo := quickstart(t, nil)
	noImage := func(c *cli) {
		c.dockerAvailable = func(context.Context) error { return nil }
		c.imageExists = func(context.Context, string) error { return errors.New("no such image") }
	}
	base := []string{"create", "--repo", repo, "--task", "x", "--data-dir", t.TempDir()}
	env := runtest.HermeticEnv(t.TempDir())

	r := runCLIOn(t, noImage, append(env, envImage+"=example/nope:1"), false, "", append(base, "--backend", "docker")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--backend docker: no sandbox image example/nope:1 on the Docker engine; build it with deploy/sandbox/build --local") {
		t.Fatalf("docker without the image: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, env, false, "", append(base, "--backend", "docker")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--backend docker: no Docker engine ("+errNoEngine.Error()) {
		t.Fatalf("docker without an engine: exit %d, %q", r.code, r.stderr)
	}
	// auto without the image: the process backend, saying why and how to fix it.
	r = runCLIOn(t, noImage, env, false, "", append(base, "--runner", sandboxRunner(t))...)
	if r.code != exitOK || !strings.Contains(r.stderr, "WARNING: no sandbox") || !strings.Contains(r.stderr, "no sandbox image "+defaultImage) || !strings.Contains(r.stderr, processWarning) {
		t.Fatalf("auto without the image: exit %d, %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{{"--isolation", "rootless"}, {"--backend", "nomad"}, {"--pass-env", "NOT_SET_ANYWHERE_1"}} {
		r := runCLI(t, env, false, "", append(base, bad...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, bad[1]) {
			t.Fatalf("%v: exit %d, %q", bad, r.code, r.stderr)
		}
	}
	r = runCLI(t, append(env, envIsolation+"=none"), false, "", base...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "$SANDBOX_ISOLATION") || !strings.Contains(r.stderr, `"none"`) {
		t.Fatalf("bad $SANDBOX_ISOLATION: exit %d, %q", r.code, r.stderr)
	}
}

func TestPassEnvAndOpenCodeConfig(t *testing.T) {
	t.Parallel()
	c := newCLI(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, []string{"OPENAI_API_KEY=sk-1", "ANTHROPIC_API_KEY=", "MINE=x"})
	o := &options{backend: "auto"}
	if err := c.dockerOptions(o, flags{}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.passEnv, ",") != "OPENAI_API_KEY" || o.image != defaultImage || o.isolation != "privileged" {
		t.Fatalf("defaults: %+v", o)
	}
	o = &options{backend: "auto"}
	if err := c.dockerOptions(o, flags{passEnv: "MINE, OPENAI_API_KEY,MINE", image: "img:1", isolation: "caps"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.passEnv, ",") != "MINE,OPENAI_API_KEY" || o.image != "img:1" || o.isolation != "caps" {
		t.Fatalf("flags: %+v", o)
	}

	p := filepath.Join(t.TempDir(), "opencode.json")
	os.WriteFile(p, []byte("{\n  \"provider\": {\"a\": {\"options\": {\"apiKey\": \"{env:B_KEY}\", \"x\": \"{env:A_KEY}\"}}}\n}\n"), 0o600)
	doc, refs, err := openCodeConfig(p)
	if err != nil || strings.Contains(doc, "\n") || strings.Join(refs, ",") != "A_KEY,B_KEY" {
		t.Fatalf("openCodeConfig = %q, %v, %v", doc, refs, err)
	}
	os.WriteFile(p, []byte("{\n  // a comment\n}\n"), 0o600)
	if _, _, err := openCodeConfig(p); err == nil || !strings.Contains(err.Error(), "not plain JSON") {
		t.Fatalf("JSONC: %v", err)
	}
}

func TestIsolationHint(t *testing.T) {
	t.Parallel()
	base := errors.New("docker backend: start T-1: docker run … img: unable to apply caps")
	if err := isolationHint(base, "privileged"); !errors.Is(err, base) || !strings.Contains(err.Error(), "--isolation caps") {
		t.Fatalf("privileged: %v", err)
	}
	if err := isolationHint(base, "caps"); err != base {
		t.Fatalf("caps: %v", err)
	}
	if isolationHint(nil, "privileged") != nil {
		t.Fatal("hint without an error")
	}
	noRuntime := fmt.Errorf("docker backend: start T-1: docker run … img: %w: docker: Error response from daemon: Unknown runtime specified runsc", dispatch.ErrIsolationRefused)
	if err := isolationHint(noRuntime, dispatch.IsolationGVisor); !errors.Is(err, noRuntime) || !strings.Contains(err.Error(), "daemon.json") {
		t.Fatalf("gvisor without runsc: %v", err)
	}
	if err := isolationHint(base, dispatch.IsolationGVisor); err != base {
		t.Fatalf("gvisor, another failure: %v", err)
	}
}

// The CLI's sandboxes are held as the bot's are (one builder,
// docker.NewBounded): the default ceilings of memory, CPU and processes
// (a repository asking for more memory gets the ceiling), and the deny
// list of SANDBOX_DENY_NETWORKS fenced in the running sandbox beside the
// link-local defaults. The test reads the running container from the host.
func TestDockerSandboxHasTheBotsBounds(t *testing.T) {
	img := testenv.SandboxImage(t)
	t.Parallel()
	repo := quickstart(t, map[string]string{".sandbox.yml": "harness: command\ncommand: |\n  while [ ! -e /sandbox/out/go ]; do sleep 0.1; done\n  echo done > DONE.md\n" +
		"plan: { required: false }\nresources: { memory_mb: 64000 }\nvalidate:\n  test: sh test.sh\n"})
	env := append(dockerEnv(t, img), envDenyNetworks+"=198.51.100.0/24,203.0.113.7:5432")
	data := dockerDataDir(t)
	done := make(chan cliRun, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		c := newCLI(strings.NewReader(""), &stdout, &stderr, env)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		code := c.run(ctx, []string{"create", "--backend", "docker", "--repo", repo, "--task", "Wait", "--data-dir", data})
		done <- cliRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	var name string
	deadline := time.Now().Add(3 * time.Minute)
	for name == "" {
		out, _ := exec.Command("docker", "ps", "--filter", "label=org.sandbox-bot.data-dir="+data, "--format", "{{.Names}}").Output()
		name = strings.TrimSpace(string(out))
		if name == "" && time.Now().After(deadline) {
			t.Fatal("no sandbox of the CLI's running")
		}
		select {
		case r := <-done:
			t.Fatalf("the CLI ended (exit %d) before its sandbox was seen:\n%s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var inspect []struct {
		HostConfig struct {
			Memory, NanoCpus int64
			PidsLimit        *int64
		}
	}
	out, err := exec.Command("docker", "inspect", name).Output()
	if err != nil || json.Unmarshal(out, &inspect) != nil || len(inspect) != 1 {
		t.Fatalf("docker inspect %s: %v", name, err)
	}
	hc := inspect[0].HostConfig
	cpus := int64(min(4, runtime.NumCPU())) * 1e9
	if hc.Memory != 8192<<20 || hc.NanoCpus != cpus || hc.PidsLimit == nil || *hc.PidsLimit != 4096 {
		t.Errorf("the CLI's sandbox has memory %d, CPU %d, pids %v; want 8 GiB, %d, 4096", hc.Memory, hc.NanoCpus, hc.PidsLimit, cpus)
	}
	// The init fenced the operator's networks before the runner started;
	// wait for the rules rather than for a time.
	var rules string
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(200 * time.Millisecond) {
		b, _ := exec.Command("docker", "exec", name, "iptables", "-S", "SANDBOX-DENY").CombinedOutput()
		if rules = string(b); strings.Contains(rules, "203.0.113.7") {
			break
		}
	}
	for _, want := range []string{
		"-A SANDBOX-DENY -d 198.51.100.0/24 -p tcp -j REJECT --reject-with tcp-reset",
		"-A SANDBOX-DENY -d 203.0.113.7/32 -p tcp -m tcp --dport 5432 -j REJECT --reject-with tcp-reset",
		"-A SANDBOX-DENY -d 169.254.0.0/16 -p tcp -j REJECT --reject-with tcp-reset",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("the CLI's sandbox's deny rules lack %q:\n%s", want, rules)
		}
	}
	outDirs, _ := filepath.Glob(filepath.Join(data, "tasks", "*", "out"))
	for _, d := range outDirs {
		os.WriteFile(filepath.Join(d, "go"), nil, 0o644)
	}
	if r := <-done; r.code != exitOK {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
}
