package nomad_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The hostile agent of the docker backend's TestHostileAgentFindsNoCredentials,
// in the real sandbox image run as Nomad runs the job the backend builds
// (the fake agent's docker driver: the token and the work order rendered by
// templates for the runner's uid): in a plan run and an execute run it finds
// no token, holds no capability, cannot read the runner's environment, and
// every push it tries to the base branch is refused; main does not move, and
// the runner pushes the run's own branch. In the caps profile and behind
// gVisor (the job's runtime, which the fake's docker driver passes to the
// engine, as Nomad's does, within the client's allow_runtimes).
func TestNomadHostileAgentFindsNoCredentials(t *testing.T) {
	testenv.Long(t, "runs the real sandbox image")
	dockertest.ForEachProfile(t, nomadHostileAgentFindsNoCredentials)
}

func nomadHostileAgentFindsNoCredentials(t *testing.T, iso dispatch.Isolation) {
	img := testenv.SandboxImage(t)
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	git := dockertest.ServeGit(t, remote.Dir, testToken)
	mainBefore := remote.SHA(t, "main")
	e := newEnv(t, nomadtest.Options{Driver: nomadtest.DockerDriver{ExtraArgs: []string{"--add-host", "host.docker.internal:host-gateway"},
		AllowRuntimes: clientAllowRuntimes}})
	b := e.backend(func(o *nomad.Options) {
		o.Image = img
		o.Isolation = iso
		o.KillTimeout = 10 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	for _, mode := range []dispatch.Mode{dispatch.ModePlan, dispatch.ModeExecute} {
		token := "ghs_" + hexOf(t, 18)
		git.SetToken(token)
		s := spec(mode, "hostile")
		s.Token = token
		cfg := sandboxcfg.Config{Harness: "command", Command: dockertest.HostileAgent,
			Env: map[string]string{"REMOTE_URL": git.URL}}
		if mode == dispatch.ModeExecute {
			cfg.Env["WRITE_FILE"] = "agent-work.txt"
		}
		s.Order.Config, s.Order.CloneURL = sandboxcfg.MustResolve(cfg), git.URL
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Wait(ctx, s.Order.TaskID, func(dispatch.Progress) {}); err != nil {
			t.Fatal(err)
		}
		stderr := allocStderr(t, e, s)
		res, err := b.Result(ctx, s.Order.TaskID)
		if err != nil || res.Status != dispatch.StatusCompleted {
			t.Fatalf("%s: result %+v, %v\nsandbox log:\n%s", mode, res, err, stderr)
		}
		report := res.Plan
		if mode == dispatch.ModeExecute {
			report = res.PRSummary
		}
		t.Logf("%s run, the agent's report:\n%s", mode, report)
		dockertest.CheckHostileReport(t, string(mode), report, token)
		dockertest.CheckKernel(t, string(mode), report, iso)
		if got := remote.SHA(t, "main"); got != mainBefore {
			t.Fatalf("%s: main moved from %s to %s", mode, mainBefore, got)
		}
		if !strings.Contains(stderr, `"message":"runner and agent separated"`) {
			t.Errorf("%s: the init did not separate the runner from the agent:\n%s", mode, stderr)
		}
		if strings.Contains(stderr, token) {
			t.Errorf("%s: the token reached the sandbox log", mode)
		}
		if mode == dispatch.ModeExecute {
			branch := s.Order.TargetBranch
			if got, ok := remote.File(t, branch, "agent-work.txt"); !ok || strings.TrimSpace(got) != "work of the agent" {
				t.Fatalf("the runner did not push the run's branch %s: %q, %v", branch, got, ok)
			}
		}
	}
}

// clientAllowRuntimes is the docker plugin's allow_runtimes of
// deploy/nomad/client.hcl (TestClientConfigAllowsTheGVisorProfile).
var clientAllowRuntimes = []string{"runc", "runsc"}

func hexOf(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// allocStderr is what the sandbox (its init and runner) wrote to stderr in
// the run's allocations.
func allocStderr(t *testing.T, e *env, s dispatch.RunSpec) string {
	t.Helper()
	var out strings.Builder
	for _, a := range e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s)) {
		out.WriteString(allocLog(e, a.ID, "stderr"))
	}
	return out.String()
}

// allocLog is one stream (stdout, stderr) the sandbox task wrote in an
// allocation, as the fake's docker driver keeps it.
func allocLog(e *env, allocID, stream string) string {
	b, _ := os.ReadFile(filepath.Join(e.fake.AllocDir(allocID), "alloc", "logs", "sandbox."+stream+".0"))
	return string(b)
}
