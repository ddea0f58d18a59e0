package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

const (
	dockerKey     = "sk-canary-docker-gateway-9d1f3e7a"
	dockerProject = "proj-canary-4242-visible"
)

// OpenCode in the real sandbox image, its provider served by the init's
// model gateway: the scripted model on the host receives the key; the
// agent finds it in no file it can read, no process environment and not
// its own; the container's configuration and the sandbox log do not hold it
// either.
func TestGatewayKeepsTheProviderKeyFromTheAgent(t *testing.T) {
	testenv.Long(t, "runs the real sandbox image")
	img := testenv.SandboxImage(t)
	key, project := dockerKey, dockerProject
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	git := dockertest.ServeGit(t, remote.Dir, "tok-1")
	srv, err := modeltest.New(dockertest.Gateway(t)+":0", []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": dockertest.KeySearch(key, project), "description": "search", "timeout": 540000}}},
			Usage: modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}},
		{Text: "1. Nothing to change.", Usage: modeltest.Usage{PromptTokens: 200, CompletionTokens: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	// The operator's provider definition has no key and a base URL that
	// does not answer: only the gateway can carry the requests.
	b, err := docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: t.TempDir(), StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{"PROJECT_TOKEN": project, dispatch.EnvOpenCodeConfigJSON: srv.OpenCodeConfigBehindGateway()},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: key}}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := "T-6A7E0001"
	// OpenCode's start in the sandbox has taken over four minutes on a
	// loaded two-core machine; the watchdog is not what this test is about.
	cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 600,
		Env: map[string]string{"PROJECT_TOKEN": "${PROJECT_TOKEN}"}}
	spec := dockertest.PlanSpec(id, git.URL, dispatch.TaskText{Title: "Search", Body: "Look around."}, cfg)
	spec.Order.SecretEnv = []string{"PROJECT_TOKEN"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res := dockertest.RunToEnd(ctx, t, b, spec)
	container := "sandbox-" + id + "-plan"
	if res.Status != dispatch.StatusCompleted {
		t.Fatalf("status %s: %+v", res.Status, res.Error)
	}

	scripted := srv.ScriptedRequests()
	if len(scripted) != 2 {
		t.Fatalf("scripted turns served: %d of 2", len(scripted))
	}
	srv.CheckCredential(t, key)
	results := scripted[1].ToolResults()
	if len(results) != 1 {
		t.Fatalf("tool results: %q", results)
	}
	dockertest.CheckSearch(t, key, results[0])

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
	wantFirstRequestAtTheGateway(t, string(logs), srv.Requests()[0].Time)
}

// wantFirstRequestAtTheGateway checks the run's progress line for the
// agent's first model request (issue 46): its sign is the gateway's, and
// its time lies between the agent's start and the provider receiving it.
func wantFirstRequestAtTheGateway(t *testing.T, logs string, providerGot time.Time) {
	t.Helper()
	var started, first *dispatch.Progress
	for _, line := range strings.Split(logs, "\n") {
		p, ok := dispatch.ParseProgress([]byte(line))
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(p.Message, "agent ") && strings.HasSuffix(p.Message, " started") && started == nil:
			started = &p
		case strings.HasPrefix(p.Message, "agent's first model request "):
			if first != nil {
				t.Fatalf("two first-request lines: %q, %q", first.Message, p.Message)
			}
			first = &p
		}
	}
	if started == nil || first == nil {
		t.Fatalf("progress: agent started %v, first model request %v; want both", started, first)
	}
	if !strings.HasSuffix(first.Message, "(seen by the model gateway)") {
		t.Fatalf("first-request line %q: want the gateway's sign", first.Message)
	}
	if first.Time.Before(started.Time) || first.Time.After(providerGot) {
		t.Fatalf("first model request at %s: want between the agent's start %s and the provider receiving it %s", first.Time, started.Time, providerGot)
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
