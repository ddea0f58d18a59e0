package docker_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// The canary provider key and a project secret, each written in two halves
// in the agent's search command, so the command text (which OpenCode
// stores in its session files) never holds either whole.
const (
	keyA, keyB         = "sk-canary-", "docker-gateway-9d1f3e7a"
	projectA, projectB = "proj-canary-", "4242-visible"
)

// agentSearch is what the agent runs, as the sandbox user, through its
// shell tool: every file it can read, every /proc/*/environ it can read,
// and its own environment, searched for the provider key; the project
// secret, which is the agent's by design, is the control that shows the
// search finds what is there.
const agentSearch = `a='` + keyA + `'; b='` + keyB + `'; k="$a$b"
c='` + projectA + `'; d='` + projectB + `'; p="$c$d"
echo "USER:$(id -un)"
echo "FILES:[$(grep -rlsIF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "$k" / 2>/dev/null | tr '\n' ' ')]"
echo "SCANNED:$(find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -readable -print 2>/dev/null | wc -l)"
echo "ENVIRON:[$(for f in /proc/[0-9]*/environ; do grep -lsaF -e "$k" "$f"; done | tr '\n' ' ')]"
echo "ENVIRON_READ:$(for f in /proc/[0-9]*/environ; do [ -r "$f" ] && cat "$f" >/dev/null 2>&1 && echo "$f"; done | wc -l)"
echo "ENV:$(env | grep -cF -e "$k")"
echo "PROJECT_ENV:$(env | grep -cF -e "$p")"
echo "PROJECT_ENVIRON:$(for f in /proc/[0-9]*/environ; do grep -lsaF -e "$p" "$f"; done | wc -l)"
echo "GATEWAY_DIR:[$(ls -A /sandbox/secrets/gateway 2>&1)]"
echo "GATEWAY:$SANDBOX_MODEL_GATEWAY"
echo "END"`

// OpenCode in the real sandbox image, its provider served by the init's
// model gateway: the scripted model on the host receives the key; the
// agent finds it in no file it can read, no process environment and not
// its own; the container's configuration and the sandbox log do not hold it
// either.
func TestGatewayKeepsTheProviderKeyFromTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real sandbox image")
	}
	img := testenv.SandboxImage(t)
	key, project := keyA+keyB, projectA+projectB
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	git := dockertest.ServeGit(t, remote.Dir, "tok-1")
	srv, err := modeltest.New(dockertest.Gateway(t)+":0", []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": agentSearch, "description": "search", "timeout": 170000}}},
			Usage: modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}},
		{Text: "1. Nothing to change.", Usage: modeltest.Usage{PromptTokens: 200, CompletionTokens: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	// The operator's provider definition has no key and a base URL that
	// does not answer: only the gateway can carry the requests.
	operator := srv.OpenCodeConfig()
	opts := operator["provider"].(map[string]any)[modeltest.ProviderID].(map[string]any)["options"].(map[string]any)
	opts["baseURL"] = "http://127.0.0.1:1/v1"
	delete(opts, "apiKey")
	doc, _ := json.Marshal(operator)
	b, err := docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: t.TempDir(), StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{"PROJECT_TOKEN": project, dispatch.EnvOpenCodeConfigJSON: string(doc)},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: key}}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := "T-6A7E0001"
	cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 240,
		Env: map[string]string{"PROJECT_TOKEN": "${PROJECT_TOKEN}"}}
	spec := dispatch.RunSpec{
		Meta: dispatch.Meta{TaskID: id, Mode: dispatch.ModePlan, Repo: "acme/demo", Number: 7, InstallationID: 1, Attempt: 1},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: dispatch.ModePlan, Attempt: 1,
			Repo: "acme/demo", Number: 7, CloneURL: git.URL, BaseBranch: "main",
			Task: dispatch.TaskText{Title: "Search", Body: "Look around."}, Config: cfg, BudgetUSD: 5,
			SecretEnv: []string{"PROJECT_TOKEN"},
		},
		Token: "tok-1",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if created, err := b.Submit(ctx, spec); err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	container := "sandbox-" + id + "-plan"
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", "--tail", "80", container).CombinedOutput()
			t.Logf("sandbox log tail:\n%s", out)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := b.Cleanup(cctx, id); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	st, err := b.Wait(ctx, id, func(dispatch.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Result(ctx, id)
	if err != nil {
		t.Fatalf("no result (state %+v): %v", st, err)
	}
	if res.Status != dispatch.StatusCompleted {
		t.Fatalf("status %s: %+v", res.Status, res.Error)
	}

	scripted := srv.ScriptedRequests()
	if len(scripted) != 2 {
		t.Fatalf("scripted turns served: %d of 2", len(scripted))
	}
	for i, q := range srv.Requests() {
		if q.Authorization != "Bearer "+key {
			t.Errorf("request %d reached the model with Authorization %q, want the gateway's key", i, q.Authorization)
		}
	}
	results := scripted[1].ToolResults()
	if len(results) != 1 {
		t.Fatalf("tool results: %q", results)
	}
	out := results[0]
	t.Logf("the agent's search:\n%s", out)
	if strings.Contains(out, key) {
		t.Fatal("the agent's search output holds the key")
	}
	field := func(name string) string {
		for _, l := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return v
			}
		}
		t.Fatalf("the search printed no %s line:\n%s", name, out)
		return ""
	}
	if !strings.Contains(out, "\nEND") {
		t.Fatalf("the search did not run to its end:\n%s", out)
	}
	for name, want := range map[string]string{
		"USER": "sandbox", "FILES": "[]", "ENVIRON": "[]", "ENV": "0", "PROJECT_ENV": "1", "GATEWAY_DIR": "[]",
	} {
		if got := field(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if n := field("PROJECT_ENVIRON"); n == "0" {
		t.Error("the control failed: the project secret was not found in any /proc/*/environ, so the search proves nothing")
	}
	if n := field("SCANNED"); len(n) < 4 {
		t.Errorf("the agent could read only %s files: the search proves little", n)
	}
	if !strings.HasPrefix(field("GATEWAY"), "http://127.0.0.1:") {
		t.Errorf("SANDBOX_MODEL_GATEWAY = %q", field("GATEWAY"))
	}

	inspect, err := exec.Command("docker", "inspect", "--format", "{{json .Config.Env}} {{json .HostConfig.Binds}} {{json .Mounts}}", container).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect: %v\n%s", err, inspect)
	}
	logs, _ := exec.Command("docker", "logs", container).CombinedOutput()
	for what, s := range map[string]string{"container configuration": string(inspect), "sandbox log": string(logs), "result.json": mustRead(t, filepath.Join(b.OutputDir(id), dispatch.ResultFile))} {
		if strings.Contains(s, key) {
			t.Errorf("the %s holds the provider key", what)
		}
	}
	if !strings.Contains(string(logs), `"message":"model gateway serving"`) {
		t.Error("the sandbox log does not show the gateway starting")
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
