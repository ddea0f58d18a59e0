package docker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
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

// TestPlanRunCPUByProcess profiles a plan run's CPU by process: the real
// image on the docker backend (caps, and gvisor beside it when the engine
// has runsc), the init's gateway, OpenCode against a scripted two-step
// plan (a shell call, then the plan), once without services (the inner
// daemon is never started) and once with one service (it is). After each
// pair, the floor: one plain `opencode run` of the same conversation (the
// prompt the sandbox's agent got, the same two turns) on the host in a
// fresh HOME. Hand-run; it prints the tables, the load average, each
// profile's CPU beside the floor and gvisor's as a ratio to caps':
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
	ref := dockertest.ServiceImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	// caps, and gvisor beside it when the engine has gVisor's runtime: the
	// same plan run in each, alternating which goes first.
	profiles := []dispatch.Isolation{dispatch.IsolationCaps}
	if ok, runtimes := testenv.HasRunsc(); ok {
		profiles = append(profiles, dispatch.IsolationGVisor)
	} else {
		t.Logf("*** the engine has no runsc (runtimes: %s): caps only ***", runtimes)
	}
	backends := map[dispatch.Isolation]*docker.Backend{}
	for _, iso := range profiles {
		backends[iso] = profileBackend(ctx, t, img, iso, srv, ref)
	}
	for i, withService := range []bool{false, true} {
		if i%2 == 1 {
			slices.Reverse(profiles)
		}
		totals := map[dispatch.Isolation]time.Duration{}
		var start time.Time
		for _, iso := range profiles {
			totals[iso], start = profilePlanRun(ctx, t, backends[iso], iso, srv, ref, git.URL, withService)
		}
		srv.Append(
			modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}}},
			modeltest.Turn{Text: "1. Document add.sh in README.md."},
		)
		plain := runtest.RunPlain(t, runtest.PlainOpenCode(t, srv, remote.Dir, runtest.PromptOf(srv, start)))
		for _, iso := range profiles {
			t.Logf("services %v, %s: sandbox and its shim %.2f s of CPU beside one plain opencode run of the same conversation on the host %.2f s (%.1f s wall): x%.2f; load average %s",
				withService, iso, totals[iso].Seconds(), plain.CPU.Seconds(), plain.Wall.Seconds(), totals[iso].Seconds()/plain.CPU.Seconds(), testenv.LoadAverage())
		}
		if c, g := totals[dispatch.IsolationCaps], totals[dispatch.IsolationGVisor]; c > 0 && g > 0 {
			t.Logf("services %v: the plan run's CPU (the container cgroup's and its shim's) gvisor %.1f s, caps %.1f s: x%.2f (load average %s)",
				withService, g.Seconds(), c.Seconds(), float64(g)/float64(c), testenv.LoadAverage())
		}
	}
}

// profileBackend is the docker backend of the profile run, in profile iso.
func profileBackend(ctx context.Context, t *testing.T, img string, iso dispatch.Isolation, srv *modeltest.Server, ref string) *docker.Backend {
	t.Helper()
	backend, err := docker.New(docker.Options{
		Image: img, Isolation: iso, DataDir: t.TempDir(), CacheDir: t.TempDir(), StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{dispatch.EnvOpenCodeConfigJSON: srv.OpenCodeConfigBehindGateway()},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: "profile-key"}}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.CacheImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return backend
}

// profilePlanRun runs one plan run, prints its table and returns the CPU
// of the container's cgroup and its shim, and when the run started (the
// floor replays the prompt the agent got).
func profilePlanRun(ctx context.Context, t *testing.T, backend *docker.Backend, iso dispatch.Isolation, srv *modeltest.Server, ref, cloneURL string, withService bool) (time.Duration, time.Time) {
	t.Helper()
	srv.Append(
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}}},
		modeltest.Turn{Text: "1. Document add.sh in README.md."},
	)
	id := fmt.Sprintf("T-%08X", rand.Uint32())
	cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 600}
	what := string(iso) + ": plan run, no services"
	if withService {
		cfg.Services = map[string]sandboxcfg.Service{"svc": {Image: ref, Ports: []int{8080}}}
		what = string(iso) + ": plan run, one service"
	}
	spec := dockertest.PlanSpec(id, cloneURL, dispatch.TaskText{Title: "Document add.sh", Body: "Say what add.sh does."}, cfg)
	prof := dockertest.ProfileContainer(t, "sandbox-"+id+"-plan")
	start := time.Now()
	res := dockertest.RunToEnd(ctx, t, backend, spec)
	wall := time.Since(start)
	report := prof.Report()
	if res.Status != dispatch.StatusCompleted {
		t.Fatalf("%s: %s %+v", what, res.Status, res.Error)
	}
	t.Logf("%s: %.1f s wall (load average %s), CPU by process:\n%s\nstart: %s", what, wall.Seconds(), testenv.LoadAverage(), report.Table(), res.Timings.Summary())
	return report.Total + report.Shim, start
}
