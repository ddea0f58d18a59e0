package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
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
	env := append(dockerEnv(t, img), "OPENCODE_CONFIG="+cfgPath, "CORP_LLM_KEY="+key)
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
}
