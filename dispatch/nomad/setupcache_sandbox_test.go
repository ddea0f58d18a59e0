package nomad_test

import (
	"context"
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

// The setup cache on Nomad, in the real image, as the fake agent's docker
// driver runs the job the backend builds with the node's host volume: the
// second plan run restores what setup made, the volume holds the
// repository's directory only, and the agent sees neither the volume nor
// the repository's entries.
func TestNomadSetupCacheOnTheNodeVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real sandbox image")
	}
	img := testenv.SandboxImage(t)
	volume := t.TempDir()
	// Another repository's entry on the node: never visible to this one.
	other := filepath.Join(volume, "acme%2Fother")
	os.MkdirAll(other, 0o700)
	os.WriteFile(filepath.Join(other, "planted.json"), []byte("{}"), 0o600)
	files := map[string]string{"README.md": "# web\n", "package-lock.json": `{"lockfileVersion":3}`, ".gitignore": "node_modules\n"}
	remote := runtest.NewRemote(t, files)
	git := dockertest.ServeGit(t, remote.Dir, testToken)
	e := newEnv(t, nomadtest.Options{Driver: nomadtest.DockerDriver{
		ExtraArgs:   []string{"--add-host", "host.docker.internal:host-gateway"},
		HostVolumes: map[string]string{"sandbox-setup-cache": volume},
	}})
	b := e.backend(func(o *nomad.Options) {
		o.Image = img
		o.Isolation = dispatch.IsolationCaps
		o.KillTimeout = 10 * time.Second
		o.SetupCache = nomad.SetupCache{Volume: "sandbox-setup-cache", MaxBytes: 1 << 30, NodeMaxBytes: 4 << 30}
	})
	agent := `cat >/dev/null; echo "## Plan"; echo "sees: $(cat node_modules/dep/index.js)"; ` +
		`echo "node: $(ls -A /cache/setup-node 2>&1 | tr '\n' ' ')"; echo "setup: $(ls /cache/setup 2>&1 | head -c 200)"`
	cfg := sandboxcfg.Config{Harness: "command", Command: agent,
		Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"mkdir -p node_modules/dep && echo made-by-setup > node_modules/dep/index.js"}}}
	run := func(trigger string) *dispatch.Result {
		t.Helper()
		s := spec(dispatch.ModePlan, trigger)
		s.Order.Config, s.Order.CloneURL = sandboxcfg.MustResolve(cfg), git.URL
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Wait(ctx, s.Order.TaskID, func(dispatch.Progress) {}); err != nil {
			t.Fatal(err)
		}
		res, err := b.Result(ctx, s.Order.TaskID)
		if err != nil || res.Status != dispatch.StatusCompleted || res.Setup == nil {
			t.Fatalf("plan %s: %v %+v\n%s", trigger, err, res, e.logs.String())
		}
		t.Logf("%s: %s\n%s", trigger, res.Setup, res.Plan)
		return res
	}
	first := run("setup-cache-1")
	if first.Setup.Status != dispatch.SetupRan || !strings.Contains(first.Setup.Cache, "saved entry") {
		t.Fatalf("first run: %s", first.Setup)
	}
	second := run("setup-cache-2")
	if second.Setup.Status != dispatch.SetupCached || !strings.Contains(second.Plan, "sees: made-by-setup") {
		t.Fatalf("second run: %s, plan %q; want the entry restored", second.Setup, second.Plan)
	}
	for _, res := range []*dispatch.Result{first, second} {
		if !strings.Contains(res.Plan, "node: \nsetup:") || strings.Contains(res.Plan, "acme%2F") {
			t.Errorf("the agent saw the node's volume: %q", res.Plan)
		}
		if !strings.Contains(res.Plan, "Permission denied") {
			t.Errorf("the agent could list the repository's setup cache: %q", res.Plan)
		}
	}
	entries, _ := filepath.Glob(filepath.Join(volume, "acme%2Fweb", "*.tar.zst"))
	if len(entries) != 1 {
		t.Errorf("the node's volume holds %v for acme/web, want one entry", entries)
	}
	if _, err := os.Stat(filepath.Join(other, "planted.json")); err != nil {
		t.Errorf("another repository's directory was touched: %v", err)
	}
}
