package docker_test

import (
	"context"
	"encoding/json"
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

// OpenCode in the real sandbox image with a project that has a dev
// server: the runner starts it, the agent reads its page through the
// image's chrome-devtools-mcp and Debian's Chromium, and every browser
// process runs as the agent's user, not as the runner or root.
func TestSandboxAgentBrowsesTheDevServer(t *testing.T) {
	testenv.Long(t, "runs the real sandbox image")
	img := testenv.SandboxImage(t)
	remote := runtest.NewRemote(t, map[string]string{
		"README.md": "# demo\n",
		"server.js": "require('http').createServer((q, s) => s.end('<h1>Sandbox canary 777</h1>')).listen(process.env.PORT, '127.0.0.1')\n",
	})
	git := dockertest.ServeGit(t, remote.Dir, "tok-1")
	call := func(name string, args map[string]any) modeltest.Turn {
		return modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: name, Args: args}}, Usage: modeltest.Usage{PromptTokens: 100, CompletionTokens: 10}}
	}
	srv, err := modeltest.New(dockertest.Gateway(t)+":0", []modeltest.Turn{
		call("browser_navigate_page", map[string]any{"type": "url", "url": "http://127.0.0.1:3000/"}),
		call("browser_take_snapshot", map[string]any{}),
		call("bash", map[string]any{"command": "ps -eo user:20,args | grep -i '[c]hrom' | awk '{print \"proc \" $1}' | sort | uniq -c", "description": "who runs the browser"}),
		{Text: "1. Nothing to change.", Usage: modeltest.Usage{PromptTokens: 200, CompletionTokens: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	doc, _ := json.Marshal(srv.OpenCodeConfig())
	b, err := docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: t.TempDir(), StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{dispatch.EnvOpenCodeConfigJSON: string(doc)},
		Logger:     zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := "T-B70E0001"
	cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 600,
		Dev: sandboxcfg.Dev{Command: "node server.js", Port: 3000}}
	spec := dockertest.PlanSpec(id, git.URL, dispatch.TaskText{Title: "Look", Body: "Look at the page."}, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res := dockertest.RunToEnd(ctx, t, b, spec)
	if res.Status != dispatch.StatusCompleted {
		t.Fatalf("status %s: %+v", res.Status, res.Error)
	}
	scripted := srv.ScriptedRequests()
	if len(scripted) != 4 {
		t.Fatalf("scripted turns served: %d of 4", len(scripted))
	}
	if snap := strings.Join(scripted[2].ToolResults(), "\n"); !strings.Contains(snap, "Sandbox canary 777") {
		t.Fatalf("the snapshot lacks the dev server's page:\n%s", snap)
	}
	procs := strings.Join(scripted[3].ToolResults(), "\n")
	if !strings.Contains(procs, "proc sandbox") || strings.Contains(procs, "proc root") || strings.Contains(procs, "proc runner") {
		t.Fatalf("the browser's processes must all be the agent's (sandbox):\n%s", procs)
	}
	if res.Tools["browser_take_snapshot"] != 1 {
		t.Fatalf("the receipt's tools %v lack the snapshot", res.Tools)
	}
}
