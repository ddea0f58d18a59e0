package docker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
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

// TestPlanRunCPUByProcess profiles a plan run's CPU by process: the real
// image on the docker backend (caps), the init's gateway, OpenCode against
// a scripted two-step plan (a shell call, then the plan), once without
// services (the inner daemon is never started) and once with one service
// (it is). After each, the floor: one plain `opencode run` of the same
// conversation (the prompt the sandbox's agent got, the same two turns) on
// the host in a fresh HOME. Hand-run; it prints the tables and the load
// average:
//
//	SANDBOX_CPUPROFILE=1 go test -count=1 -run TestPlanRunCPUByProcess -v ./dispatch/docker/
//
// The bot's side of a run is measured through the bot, by
// cmd/sandbox-bot's TestPlanRunCPU.
func TestPlanRunCPUByProcess(t *testing.T) {
	if os.Getenv("SANDBOX_CPUPROFILE") == "" {
		t.Skip("hand-run profile: set SANDBOX_CPUPROFILE=1")
	}
	img := testenv.SandboxImage(t)
	testenv.NPMBin(t, "opencode")
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n", "add.sh": "echo $(($1 + $2))\n"})
	git := dockertest.ServeGit(t, remote.Dir, "tok-1")
	srv, err := modeltest.New(dockertest.Gateway(t)+":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	backend, err := docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: t.TempDir(), CacheDir: cache, StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{dispatch.EnvOpenCodeConfigJSON: srv.OpenCodeConfigBehindGateway()},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: "profile-key"}}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := dockertest.ServiceImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := backend.CacheImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, withService := range []bool{false, true} {
		srv.Append(
			modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}}},
			modeltest.Turn{Text: "1. Document add.sh in README.md."},
		)
		id := fmt.Sprintf("T-%08X", rand.Uint32())
		cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 600}
		what := "plan run, no services"
		if withService {
			cfg.Services = map[string]sandboxcfg.Service{"svc": {Image: ref, Ports: []int{8080}}}
			what = "plan run, one service"
		}
		spec := dockertest.PlanSpec(id, git.URL, dispatch.TaskText{Title: "Document add.sh", Body: "Say what add.sh does."}, cfg)
		prof := dockertest.ProfileContainer(t, "sandbox-"+id+"-plan")
		load0 := dockertest.LoadAverage()
		start := time.Now()
		res := dockertest.RunToEnd(ctx, t, backend, spec)
		wall := time.Since(start)
		report := prof.Report()
		if res.Status != dispatch.StatusCompleted {
			t.Fatalf("%s: %s %+v", what, res.Status, res.Error)
		}
		srv.Append(
			modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}}},
			modeltest.Turn{Text: "1. Document add.sh in README.md."},
		)
		plain := dockertest.RunPlain(t, dockertest.PlainOpenCode(t, srv, remote.Dir, dockertest.PromptOf(srv, start)))
		load1 := dockertest.LoadAverage()
		sandbox := report.Total + report.Shim
		t.Logf("%s: %.1f s wall, CPU by process:\n%s\nstart: %s\nsandbox and its shim %.2f s of CPU beside one plain opencode run of the same conversation on the host %.2f s (%.1f s wall): x%.2f; load average %.1f → %.1f",
			what, wall.Seconds(), report.Table(), res.Timings.Summary(), sandbox.Seconds(), plain.CPU.Seconds(), plain.Wall.Seconds(),
			sandbox.Seconds()/plain.CPU.Seconds(), load0, load1)
	}
}
