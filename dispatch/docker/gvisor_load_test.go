package docker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestSetupIOGVisorVsCaps measures an I/O-heavy setup behind gVisor beside
// the same in the caps profile: `npm ci` of 300 packages from the registry
// fixture (about 900 files written into node_modules through the sandbox's
// file system), the setup cache off so every run runs it, in plan runs on
// the docker backend and the real image, alternating which profile goes
// first. It prints each run's setup stage (the receipt's timings) with the
// load average, the means and gvisor's as a ratio to caps'. Hand-run:
//
//	SANDBOX_GVISORLOAD=1 go test -count=1 -timeout 60m -run TestSetupIOGVisorVsCaps -v ./dispatch/docker/
func TestSetupIOGVisorVsCaps(t *testing.T) {
	testenv.HandRun(t, "SANDBOX_GVISORLOAD", "go test -count=1 -timeout 60m -run TestSetupIOGVisorVsCaps -v ./dispatch/docker/")
	img := testenv.SandboxImage(t)
	testenv.Runsc(t)
	var pkgs []dockertest.NPMPackage
	for i := 0; i < 300; i++ {
		pkgs = append(pkgs, dockertest.NPMPackage{Name: fmt.Sprintf("pkg-%03d", i), Version: "1.0.0",
			Body: strings.Repeat(fmt.Sprintf("module.exports.n%d = %d;\n", i, i), 100)})
	}
	npm := dockertest.ServeNPM(t, pkgs...)
	files := npm.Project("demo", pkgs...)
	files["README.md"] = "# demo\n"
	remote := runtest.NewRemote(t, files)
	git := dockertest.ServeGit(t, remote.Dir, "tok-1")
	off := false
	cfg := sandboxcfg.Config{Harness: "command", Command: "echo '1. Nothing to do.'",
		Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"npm ci"}}, Cache: sandboxcfg.Cache{Enabled: &off}}
	backends := map[dispatch.Isolation]*docker.Backend{}
	profiles := []dispatch.Isolation{dispatch.IsolationCaps, dispatch.IsolationGVisor}
	for _, iso := range profiles {
		b, err := docker.New(docker.Options{Image: img, Isolation: iso, DataDir: t.TempDir(), CacheDir: t.TempDir(), StopGrace: 30 * time.Second,
			ExtraHosts: []string{"host.docker.internal:host-gateway"}, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		if err != nil {
			t.Fatal(err)
		}
		backends[iso] = b
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("SANDBOX_GVISORLOAD_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	setup := map[dispatch.Isolation][]time.Duration{}
	for i := 0; i < rounds; i++ {
		if i > 0 {
			slices.Reverse(profiles)
		}
		for _, iso := range profiles {
			id := fmt.Sprintf("T-%08X", rand.Uint32())
			res := dockertest.RunToEnd(ctx, t, backends[iso], dockertest.PlanSpec(id, git.URL, dispatch.TaskText{Title: "Setup", Body: "Time the setup."}, cfg))
			if res.Status != dispatch.StatusCompleted {
				t.Fatalf("%s: %s %+v", iso, res.Status, res.Error)
			}
			d := stageTook(res.Timings, "setup")
			setup[iso] = append(setup[iso], d)
			t.Logf("round %d, %s: npm ci (setup) %s, %s (load average %s)", i+1, iso, d.Round(time.Millisecond), res.Timings.Summary(), testenv.LoadAverage())
		}
	}
	c, g := meanOf(setup[dispatch.IsolationCaps]), meanOf(setup[dispatch.IsolationGVisor])
	t.Logf("npm ci of %d packages: gvisor %s (%v), caps %s (%v): x%.2f (load average %s)", len(pkgs),
		g.Round(time.Millisecond), setup[dispatch.IsolationGVisor], c.Round(time.Millisecond), setup[dispatch.IsolationCaps], float64(g)/float64(c), testenv.LoadAverage())
}

// stageTook is the duration of the receipt's stage named stage.
func stageTook(tm *dispatch.Timings, stage string) time.Duration {
	if tm == nil {
		return 0
	}
	for _, s := range tm.Stages {
		if s.Stage == stage {
			return time.Duration(s.Seconds * float64(time.Second))
		}
	}
	return 0
}

func meanOf(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}
