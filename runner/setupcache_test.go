package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// These run the setup cache through the runner on the process backend
// with the command harness: the pipeline's decisions (key, restore, save
// only on the base commit and before the agent). The Docker test
// (dispatch/docker/setupcache_sandbox_test.go) runs the same with npm ci,
// the real image and OpenCode, the runner and the agent as two users.

// cachedProject is a repository whose setup "installs" node_modules from
// its lock file and counts its own runs in a file outside the checkout.
func cachedProject() map[string]string {
	files := projectFiles()
	files["package-lock.json"] = `{"lockfileVersion":3,"packages":{"node_modules/dep":{"version":"1.0.0"}}}`
	files["package.json"] = `{"name":"calc"}`
	files[".gitignore"] = "node_modules\n"
	return files
}

func cachedCfg(agent string) sandboxcfg.Config {
	cfg := commandCfg(agent)
	cfg.Lifecycle.Setup = []string{`echo run >> "$SETUP_COUNT"; mkdir -p node_modules/dep && grep -o '"version":"[^"]*"' package-lock.json > node_modules/dep/index.js`}
	return cfg
}

type cacheRig struct {
	t      *testing.T
	remote *runtest.Remote
	cache  string
	count  string
	seen   string
}

func newCacheRig(t *testing.T) *cacheRig {
	dir := t.TempDir()
	return &cacheRig{t: t, remote: runtest.NewRemote(t, cachedProject()), cache: filepath.Join(dir, "cache"), count: filepath.Join(dir, "count"), seen: filepath.Join(dir, "seen")}
}

// run is one plan run whose agent records what node_modules held when it
// started, then writes into node_modules as a hostile agent would.
func (c *cacheRig) run(mode dispatch.Mode, repo string) *dispatch.Result {
	c.t.Helper()
	os.MkdirAll(c.cache, 0o700)
	agent := `cat > /dev/null; cat node_modules/dep/index.js > "$SEEN"; echo 'evil()' > node_modules/dep/index.js; echo '## Plan'; echo ok`
	if mode != dispatch.ModePlan {
		agent = `cat > /dev/null; cat node_modules/dep/index.js > "$SEEN"; echo 'evil()' > node_modules/dep/index.js; echo change >> README.md`
	}
	e := newRunEnv(c.t, nil)
	// A project's TAR_OPTIONS must not reach the cache's tar.
	e.opts.Environ = append(e.opts.Environ, "SETUP_COUNT="+c.count, "SEEN="+c.seen, "TAR_OPTIONS=--exclude=node_modules")
	e.opts.SetupCacheDir = c.cache
	o := order(c.t, c.remote.URL, mode, cachedCfg(agent))
	o.Repo = repo
	res := run(c.t, e, o)
	wantStatus(c.t, res, dispatch.StatusCompleted)
	if res.Setup == nil {
		c.t.Fatal("the receipt has no setup report")
	}
	return res
}

func (c *cacheRig) setupRuns() int {
	b, _ := os.ReadFile(c.count)
	return strings.Count(string(b), "run")
}

func (c *cacheRig) agentSaw() string {
	b, _ := os.ReadFile(c.seen)
	return strings.TrimSpace(string(b))
}

func TestSetupCacheRestoresOnTheSecondRun(t *testing.T) {
	t.Parallel()
	c := newCacheRig(t)
	first := c.run(dispatch.ModePlan, "acme/calc")
	if first.Setup.Status != dispatch.SetupRan || !strings.HasPrefix(first.Setup.Cache, "saved entry") {
		t.Fatalf("first run: %s, want setup run and saved", first.Setup)
	}
	second := c.run(dispatch.ModePlan, "acme/calc")
	if second.Setup.Status != dispatch.SetupCached || !strings.HasPrefix(second.Setup.Cache, "restored entry") {
		t.Fatalf("second run: %s, want setup: cached", second.Setup)
	}
	if n := c.setupRuns(); n != 1 {
		t.Errorf("setup ran %d times in two runs, want once", n)
	}
	// The first run's agent wrote into node_modules after the save: the
	// second run's agent sees what setup made, not that.
	if got := c.agentSaw(); got != `"version":"1.0.0"` {
		t.Errorf("the second agent saw node_modules/dep/index.js = %q, want what setup wrote", got)
	}
	if second.Timings == nil || len(second.Timings.Stages) == 0 || second.Timings.FirstEventSeconds < 0 {
		t.Errorf("timings: %+v", second.Timings)
	}
}

func TestSetupCacheKeyFollowsTheLockFile(t *testing.T) {
	t.Parallel()
	c := newCacheRig(t)
	c.run(dispatch.ModePlan, "acme/calc")
	c.remote.Commit(t, "main", "main", map[string]string{"package-lock.json": `{"lockfileVersion":3,"packages":{"node_modules/dep":{"version":"2.0.0"}}}`}, "bump dep")
	res := c.run(dispatch.ModePlan, "acme/calc")
	if res.Setup.Status != dispatch.SetupRan || c.setupRuns() != 2 || c.agentSaw() != `"version":"2.0.0"` {
		t.Fatalf("after a lock file change: %s, setup ran %d times, agent saw %q; want setup to run again", res.Setup, c.setupRuns(), c.agentSaw())
	}
}

func TestSetupCacheIsPerRepository(t *testing.T) {
	t.Parallel()
	c := newCacheRig(t)
	c.run(dispatch.ModePlan, "acme/one")
	res := c.run(dispatch.ModePlan, "acme/two")
	if res.Setup.Status != dispatch.SetupRan || c.setupRuns() != 2 {
		t.Fatalf("another repository with the same files: %s; want its own setup", res.Setup)
	}
}

func TestSetupCacheRefusesACorruptEntry(t *testing.T) {
	t.Parallel()
	c := newCacheRig(t)
	c.run(dispatch.ModePlan, "acme/calc")
	archives, _ := filepath.Glob(filepath.Join(c.cache, "*.tar.zst"))
	if len(archives) != 1 {
		t.Fatalf("cache holds %v, want one archive", archives)
	}
	b, _ := os.ReadFile(archives[0])
	b[len(b)-3] ^= 0x5a
	os.WriteFile(archives[0], b, 0o600)
	res := c.run(dispatch.ModePlan, "acme/calc")
	if res.Setup.Status != dispatch.SetupRan || !strings.Contains(res.Setup.Cache, "refused") || c.setupRuns() != 2 {
		t.Fatalf("corrupt entry: %s (setup ran %d times); want it refused and setup run", res.Setup, c.setupRuns())
	}
	if c.agentSaw() != `"version":"1.0.0"` {
		t.Errorf("agent saw %q", c.agentSaw())
	}
}

func TestSetupCacheIsNotSavedFromAnAgentBranch(t *testing.T) {
	t.Parallel()
	c := newCacheRig(t)
	branch := dispatch.BranchName(taskID, "Add notes")
	c.remote.Commit(t, branch, "main", map[string]string{"package-lock.json": `{"lockfileVersion":3,"packages":{"node_modules/dep":{"version":"6.6.6"}}}`}, "agent work")
	res := c.run(dispatch.ModeRevise, "acme/calc")
	if res.Setup.Status != dispatch.SetupRan || !strings.Contains(res.Setup.Cache, "not saved: the checkout is not the base branch's own commit") {
		t.Fatalf("revise run on the agent's branch: %s", res.Setup)
	}
	if entries, _ := filepath.Glob(filepath.Join(c.cache, "*")); len(entries) != 0 {
		t.Fatalf("an agent branch's setup left %v in the cache", entries)
	}
}
