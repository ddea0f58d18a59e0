package docker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// setupCacheRig is the docker backend with a cache directory, the real
// image, the real OpenCode against a scripted model behind the init's
// gateway, and an npm project whose setup is `npm ci` from a registry
// fixture on the bridge.
type setupCacheRig struct {
	t       *testing.T
	backend *docker.Backend
	cache   string
	srv     *modeltest.Server
	npm     *dockertest.NPMRegistry
	remote  *runtest.Remote
	git     *gitservetest.Server
}

var (
	leftPad1 = dockertest.NPMPackage{Name: "left-pad", Version: "1.0.0", Body: "module.exports = 'left-pad one';\n"}
	leftPad2 = dockertest.NPMPackage{Name: "left-pad", Version: "1.1.0", Body: "module.exports = 'left-pad two';\n"}
	isOdd    = dockertest.NPMPackage{Name: "is-odd", Version: "3.0.1", Body: "module.exports = n => n % 2 === 1;\n"}
)

func newSetupCacheRig(t *testing.T) *setupCacheRig {
	img := testenv.SandboxImage(t)
	testenv.NPMBin(t, "opencode")
	c := &setupCacheRig{t: t, cache: t.TempDir()}
	c.npm = dockertest.ServeNPM(t, leftPad1, leftPad2, isOdd)
	files := c.npm.Project("demo", leftPad1, isOdd)
	files["README.md"] = "# demo\n"
	c.remote = runtest.NewRemote(t, files)
	c.git = dockertest.ServeGit(t, c.remote.Dir, "tok-1")
	srv, err := modeltest.New(dockertest.Gateway(t)+":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c.srv = srv
	c.backend, err = docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: t.TempDir(), CacheDir: c.cache, StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{dispatch.EnvOpenCodeConfigJSON: srv.OpenCodeConfigBehindGateway()},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: "test-key"}}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// plan runs a plan of repo whose agent first runs command (a bash tool
// call), then writes its plan; it returns the receipt and what the
// command printed, as the model received it.
func (c *setupCacheRig) plan(repo, command string) (*dispatch.Result, string) {
	t := c.t
	t.Helper()
	before := len(c.srv.Requests())
	c.srv.Append(
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": command, "description": "look at the dependencies"}}}},
		modeltest.Turn{Text: "1. Use left-pad."},
	)
	id := fmt.Sprintf("T-%08X", rand.Uint32())
	cfg := sandboxcfg.Config{Harness: "opencode", Model: c.srv.OpenCodeModel(), InactivitySeconds: 600,
		Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"npm ci"}}}
	spec := dockertest.PlanSpec(id, c.git.URL, dispatch.TaskText{Title: "Pad", Body: "Pad the output."}, cfg)
	spec.Meta.Repo, spec.Order.Repo = repo, repo
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res := dockertest.RunToEnd(ctx, t, c.backend, spec)
	if res.Status != dispatch.StatusCompleted || res.Setup == nil {
		t.Fatalf("plan %s of %s: status %s, setup %v: %+v", id, repo, res.Status, res.Setup, res.Error)
	}
	var out string
	for _, r := range c.srv.Requests()[before:] {
		t.Logf("model request at %s: turn %d (retry %v, side request %v), %d messages", r.Time.Format("15:04:05.000"), r.Turn, r.Retry, r.Title, len(r.Messages))
		if results := r.ToolResults(); len(results) > 0 {
			out = results[len(results)-1]
		}
	}
	t.Logf("%s: %s; the agent's command printed %q; timings: %s", repo, res.Setup, out, res.Timings.Summary())
	return res, out
}

func (c *setupCacheRig) entries(repo string) []string {
	m, _ := filepath.Glob(filepath.Join(c.cache, "repos", strings.ReplaceAll(repo, "/", "%2F"), "setup", "*.tar.zst"))
	return m
}

// The setup cache through the docker backend, the real image and the real
// OpenCode, the runner and the agent as two users: a second plan run
// restores what `npm ci` produced and does not run it; a change of the
// lock file runs it again; what an agent writes into node_modules is not
// what the next run restores; a corrupt entry is refused and setup runs;
// another repository never gets the entry.
func TestSetupCacheInTheSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs six sandboxes with OpenCode; skipped under -short")
	}
	c := newSetupCacheRig(t)
	const repo = "acme/demo"
	look := "cat node_modules/left-pad/index.js; echo 'evil();' > node_modules/left-pad/index.js"

	first, out := c.plan(repo, look)
	if first.Setup.Status != dispatch.SetupRan || !strings.Contains(first.Setup.Cache, "saved entry") {
		t.Fatalf("first run: %s; want npm ci run and its node_modules saved", first.Setup)
	}
	if !strings.Contains(out, "left-pad one") || c.npm.Served() != 2 {
		t.Fatalf("first run: the agent saw %q, the registry served %d tarballs; want npm ci's install", out, c.npm.Served())
	}
	if n := len(c.entries(repo)); n != 1 {
		t.Fatalf("the repository's setup cache holds %d entries, want 1", n)
	}
	if st, err := os.Stat(filepath.Dir(c.entries(repo)[0])); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the setup cache directory: %v, mode %v; want 0700, the runner's alone", err, st.Mode().Perm())
	}

	second, out := c.plan(repo, look)
	if second.Setup.Status != dispatch.SetupCached || !strings.Contains(second.Setup.Cache, "restored entry") {
		t.Fatalf("second run: %s; want setup: cached", second.Setup)
	}
	if strings.Contains(out, "evil") || !strings.Contains(out, "left-pad one") {
		t.Fatalf("second run: the agent saw %q; want what npm ci installed, not what the first agent wrote", out)
	}
	if c.npm.Served() != 2 {
		t.Errorf("the registry served %d tarballs by the second run; npm ci ran again", c.npm.Served())
	}

	// Another repository with the very same files never gets the entry.
	other, out := c.plan("acme/other", "cat node_modules/left-pad/index.js")
	if other.Setup.Status != dispatch.SetupRan || !strings.Contains(out, "left-pad one") {
		t.Fatalf("another repository: %s, agent saw %q; want its own npm ci", other.Setup, out)
	}
	if len(c.entries("acme/other")) != 1 || len(c.entries(repo)) != 1 {
		t.Errorf("entries: %v and %v; want one per repository", c.entries(repo), c.entries("acme/other"))
	}

	// A corrupt entry is refused, and setup runs.
	archive := c.entries(repo)[0]
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(archive, b, 0o600); err != nil {
		t.Fatal(err)
	}
	refused, out := c.plan(repo, "cat node_modules/left-pad/index.js")
	if refused.Setup.Status != dispatch.SetupRan || !strings.Contains(refused.Setup.Cache, "refused") || !strings.Contains(out, "left-pad one") {
		t.Fatalf("corrupt entry: %s, agent saw %q; want it refused and npm ci run", refused.Setup, out)
	}

	// A new lock file is a new key: setup runs again.
	bumped := c.npm.Project("demo", leftPad2, isOdd)
	c.remote.Commit(t, "main", "main", map[string]string{"package.json": bumped["package.json"], "package-lock.json": bumped["package-lock.json"]}, "bump left-pad")
	third, out := c.plan(repo, "cat node_modules/left-pad/index.js")
	if third.Setup.Status != dispatch.SetupRan || !strings.Contains(out, "left-pad two") {
		t.Fatalf("after the lock file changed: %s, agent saw %q; want npm ci to run again", third.Setup, out)
	}
	fourth, out := c.plan(repo, "cat node_modules/left-pad/index.js")
	if fourth.Setup.Status != dispatch.SetupCached || !strings.Contains(out, "left-pad two") {
		t.Fatalf("the run after: %s, agent saw %q; want the new entry restored", fourth.Setup, out)
	}
}
