package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A hostile agent, in a plan run and in an execute run on the real sandbox
// image: the token (delivered as the backend delivers it; a mid-run
// refresh through the moved directory is TestSandboxRunsATask's) and a canary secret given to the sandbox for
// the runner (GITHUB_TOKEN in its environment) are nowhere it can read,
// it holds no capability, the runner's /proc entries are closed to it,
// every push to the base branch is refused and main does not move; and the
// runner still pushes the run's own branch.
func TestHostileAgentFindsNoCredentials(t *testing.T) {
	dockertest.ForEachProfile(t, hostileAgentFindsNoCredentials)
}

func hostileAgentFindsNoCredentials(t *testing.T, iso dispatch.Isolation) {
	canary := "canary-" + randomHex(t, 12)
	f := newFixture(t, withIsolation(iso), func(o *docker.Options) {
		o.Env = map[string]string{"GITHUB_TOKEN": canary}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	mainBefore := f.remote.SHA(t, "main")

	for i, mode := range []dispatch.Mode{dispatch.ModePlan, dispatch.ModeExecute} {
		token := "ghs_" + randomHex(t, 18)
		f.git.SetToken(token)
		cfg := sandboxcfg.Config{Harness: "command", Command: dockertest.HostileAgent,
			Env: map[string]string{"REMOTE_URL": f.git.URL}}
		if mode == dispatch.ModeExecute {
			cfg.Env["WRITE_FILE"] = "agent-work.txt"
		}
		id := "T-5A0D01" + string(rune('0'+i)) + "0"
		spec := f.spec(id, mode, cfg)
		spec.Token = token
		f.submit(t, ctx, spec)
		st := wait(ctx, f.b, id).result(t)
		res, err := f.b.Result(ctx, id)
		if err != nil {
			t.Fatalf("%s: result: %v (status %+v)", mode, err, st)
		}
		if res.Status != dispatch.StatusCompleted {
			t.Fatalf("%s: status %s: %+v", mode, res.Status, res.Error)
		}
		report := res.Plan
		if mode == dispatch.ModeExecute {
			report = res.PRSummary
		}
		t.Logf("%s run, the agent's report:\n%s", mode, report)
		dockertest.CheckHostileReport(t, string(mode), report, token, canary)
		dockertest.CheckKernel(t, string(mode), report, iso)
		if got := f.remote.SHA(t, "main"); got != mainBefore {
			t.Fatalf("%s: main moved from %s to %s", mode, mainBefore, got)
		}
		log := sandboxLog(t, id, mode)
		if !strings.Contains(log, `"message":"runner and agent separated"`) {
			t.Errorf("%s: the init did not separate the runner from the agent", mode)
		}
		if strings.Contains(log, token) || strings.Contains(log, canary) {
			t.Errorf("%s: a secret reached the sandbox log", mode)
		}
		if mode == dispatch.ModeExecute {
			branch := spec.Order.TargetBranch
			if got, ok := f.remote.File(t, branch, "agent-work.txt"); !ok || strings.TrimSpace(got) != "work of the agent" {
				t.Fatalf("the runner did not push the run's branch %s: %q, %v", branch, got, ok)
			}
			if res.HeadSHA != f.remote.SHA(t, branch) {
				t.Errorf("head_sha %s, remote at %s", res.HeadSHA, f.remote.SHA(t, branch))
			}
		}
	}
}
