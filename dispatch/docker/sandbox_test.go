package docker_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// These tests run the real sandbox image (deploy/sandbox/build --local) on
// the real engine under the caps profile, with the real runner inside: the
// agent is a shell script (the command harness), the remote a bare
// repository served over HTTP on the bridge gateway with token auth, and
// the service an image built here and handed to the sandbox through the
// image cache.

type fixture struct {
	b      *docker.Backend
	cache  string
	remote *runtest.Remote
	git    *gitservetest.Server
	svc    string
}

func newFixture(t *testing.T, opts ...func(*docker.Options)) *fixture {
	t.Helper()
	img := testenv.SandboxImage(t)
	f := &fixture{svc: dockertest.ServiceImage(t)}
	f.remote = runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	f.git = dockertest.ServeGit(t, f.remote.Dir, "tok-1")
	f.cache = t.TempDir()
	o := docker.Options{
		Image:      img,
		Isolation:  dispatch.IsolationCaps,
		DataDir:    t.TempDir(),
		CacheDir:   f.cache,
		StopGrace:  30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Logger:     zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	}
	for _, opt := range opts {
		opt(&o)
	}
	b, err := docker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CacheImage(ctx, f.svc); err != nil {
		t.Fatal(err)
	}
	return f
}

// withIsolation runs the fixture's sandboxes in profile iso.
func withIsolation(iso dispatch.Isolation) func(*docker.Options) {
	return func(o *docker.Options) { o.Isolation = iso }
}

func (f *fixture) spec(id string, mode dispatch.Mode, cfg sandboxcfg.Config) dispatch.RunSpec {
	o := dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: mode, Attempt: 1,
		Repo: "acme/demo", Number: 7, CloneURL: f.git.URL, BaseBranch: "main",
		TargetBranch: dispatch.BranchName(id, "Demo"),
		Task:         dispatch.TaskText{Title: "Demo", Body: "Do the demo."},
		Plan:         "1. Do it.", Config: sandboxcfg.MustResolve(cfg), BudgetUSD: 5,
	}
	return dispatch.RunSpec{
		Meta:  dispatch.Meta{TaskID: id, Mode: mode, Repo: "acme/demo", Number: 7, InstallationID: 1, Attempt: 1},
		Order: o, Token: "tok-1",
	}
}

func (f *fixture) submit(t *testing.T, ctx context.Context, spec dispatch.RunSpec) {
	t.Helper()
	created, err := f.b.Submit(ctx, spec)
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SANDBOX_TEST_LOGS") != "" {
			out, _ := exec.Command("docker", "logs", "--tail", "60", "sandbox-"+spec.Meta.TaskID+"-"+string(spec.Meta.Mode)).CombinedOutput()
			t.Logf("sandbox log tail:\n%s", out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.b.Cleanup(ctx, spec.Meta.TaskID); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
}

// waiter runs Wait in the background and lets the test wait for a
// progress line.
type waiter struct {
	mu    sync.Mutex
	lines []dispatch.Progress
	seen  chan struct{}
	done  chan struct{}
	st    dispatch.RunStatus
	err   error
}

func wait(ctx context.Context, b *docker.Backend, id string) *waiter {
	w := &waiter{seen: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.st, w.err = b.Wait(ctx, id, func(p dispatch.Progress) {
			w.mu.Lock()
			w.lines = append(w.lines, p)
			w.mu.Unlock()
			select {
			case w.seen <- struct{}{}:
			default:
			}
		})
	}()
	return w
}

// until blocks until a progress line satisfies ok, failing at ctx's end.
func (w *waiter) until(t *testing.T, ctx context.Context, what string, ok func(dispatch.Progress) bool) {
	t.Helper()
	for {
		w.mu.Lock()
		for _, p := range w.lines {
			if ok(p) {
				w.mu.Unlock()
				return
			}
		}
		w.mu.Unlock()
		select {
		case <-w.seen:
		case <-w.done:
			t.Fatalf("run ended (%+v, %v) before %s", w.st, w.err, what)
		case <-ctx.Done():
			t.Fatalf("no progress line for %s: %v", what, ctx.Err())
		}
	}
}

func (w *waiter) result(t *testing.T) dispatch.RunStatus {
	t.Helper()
	<-w.done
	if w.err != nil {
		t.Fatalf("Wait: %v", w.err)
	}
	return w.st
}

func toolIs(name string) func(dispatch.Progress) bool {
	return func(p dispatch.Progress) bool { return p.Tool == name }
}

func sandboxLog(t *testing.T, id string, mode dispatch.Mode) string {
	t.Helper()
	out, err := exec.Command("docker", "logs", "sandbox-"+id+"-"+string(mode)).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs: %v: %s", err, out)
	}
	return string(out)
}

func webService(svc string) map[string]sandboxcfg.Service {
	// The service listens only after 400 ms: the health probe has to wait
	// for it, not for a fixed sleep.
	return map[string]sandboxcfg.Service{"web": {
		Image: svc, Ports: []int{8080}, Env: map[string]string{"DELAY_MS": "400"},
		Healthcheck: &sandboxcfg.Healthcheck{HTTP: "/health"},
	}}
}

// A sandbox starts, its inner dockerd comes up, the service from
// .sandbox.yml becomes healthy, setup runs, the runner runs the command
// harness as the sandbox user, pushes over HTTP with the delivered (and
// meanwhile refreshed) token, and result.json comes back. The agent also
// looks around: it must see only the inner daemon, never the host's.
func TestSandboxRunsATask(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{
		Harness:  "command",
		Services: webService(f.svc),
		Env:      map[string]string{"WEB_URL": "http://{web}/health"},
		Command: `set -e
curl -fsS "$WEB_URL" > health.txt
cp /tmp/setup-user setup-user.txt
id -un > agent-user.txt
docker ps -a --format '{{.Names}}' > inner-containers.txt
docker info --format '{{.Name}}' > docker-host.txt
grep -c docker.sock /proc/self/mountinfo > host-socket-mounts.txt || true
echo "$npm_config_cache $GOMODCACHE $PIP_CACHE_DIR" > caches.txt
touch "$npm_config_cache/written-by-the-agent"
echo '{"type":"tool_use","tool":"write","input":{"filePath":"health.txt"}}'
while [ ! -e /sandbox/out/go ]; do sleep 0.1; done
echo 'Checked the service.'`,
	}
	cfg.Lifecycle.Setup = []string{"id -un > /tmp/setup-user"}
	cfg.Validate = sandboxcfg.Checks{{Name: "health", Command: "grep -qx ok health.txt"}}
	spec := f.spec("T-5A0D0001", dispatch.ModeExecute, cfg)
	f.submit(t, ctx, spec)
	if created, err := f.b.Submit(ctx, spec); err != nil || created {
		t.Fatalf("second Submit of the same task = %v, %v; want false, nil", created, err)
	}
	id := spec.Meta.TaskID

	w := wait(ctx, f.b, id)
	w.until(t, ctx, "the agent's write", toolIs("write"))
	if st, err := f.b.Status(ctx, id); err != nil || st.State != dispatch.StateRunning || st.Meta.Repo != "acme/demo" || st.Meta.Number != 7 {
		t.Fatalf("Status while running = %+v, %v", st, err)
	}
	// The token expires while the agent works: the bot refreshes it, the
	// remote stops taking the old one, and the final push must still work.
	if err := f.b.RefreshToken(ctx, id, "tok-2"); err != nil {
		t.Fatal(err)
	}
	f.git.SetToken("tok-2")
	if err := os.WriteFile(filepath.Join(f.b.OutputDir(id), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := w.result(t)
	if st.State != dispatch.StateComplete || st.ExitCode != 0 || st.EndedAt.IsZero() {
		t.Fatalf("final status = %+v", st)
	}
	res, err := f.b.Result(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusCompleted || res.TaskID != id || res.Branch != spec.Order.TargetBranch {
		t.Fatalf("result = %+v (error %+v)", res, res.Error)
	}
	if len(res.Validation) != 1 || !res.Validation[0].Passed {
		t.Errorf("validation = %+v", res.Validation)
	}
	branch := spec.Order.TargetBranch
	for file, want := range map[string]string{
		"health.txt":             "ok",      // the service answered through its placeholder address
		"setup-user.txt":         "sandbox", // setup ran, unprivileged
		"agent-user.txt":         "sandbox",
		"inner-containers.txt":   "web",     // the inner daemon's containers only, not the sandbox itself
		"docker-host.txt":        "sandbox", // the daemon the agent talks to is the sandbox's own
		"host-socket-mounts.txt": "0",       // nothing mounts a docker.sock in
		"caches.txt":             "/cache/npm /cache/go/mod /cache/pip",
	} {
		got, ok := f.remote.File(t, branch, file)
		if !ok || strings.TrimSpace(got) != want {
			t.Errorf("%s on %s = %q (%v), want %q", file, branch, got, ok, want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.cache, "repos", "acme%2Fdemo", "npm", "written-by-the-agent")); err != nil {
		t.Errorf("the npm cache is not the repository's cache directory on the host: %v", err)
	}
	if f.git.Pushes() == 0 {
		t.Error("no authenticated push reached the remote")
	}
	if res.HeadSHA != f.remote.SHA(t, branch) {
		t.Errorf("head_sha %s, remote at %s", res.HeadSHA, f.remote.SHA(t, branch))
	}
	var done bool
	for _, p := range w.lines {
		done = done || (p.Stage == "done" && p.Status == dispatch.StatusCompleted)
	}
	if !done {
		t.Errorf("no final progress line among %d", len(w.lines))
	}
	log := sandboxLog(t, id, spec.Meta.Mode)
	for _, want := range []string{`"message":"storage driver chosen"`, `"message":"inner dockerd ready"`, `"service":"web"`, `"message":"image loaded from the cache"`, `"user":"runner"`, `"agent_user":"sandbox"`, `"message":"inner daemon stopped"`} {
		if !strings.Contains(log, want) {
			t.Errorf("sandbox log lacks %s", want)
		}
	}
	if strings.Contains(log, "tok-1") || strings.Contains(log, "tok-2") {
		t.Error("a token reached the sandbox log")
	}

	runs, err := f.b.List(ctx)
	if err != nil || len(runs) != 1 || runs[0].Meta.TaskID != id || runs[0].State != dispatch.StateComplete {
		t.Fatalf("List = %+v, %v", runs, err)
	}
	if err := f.b.Cleanup(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.b.TaskDir(id)); !os.IsNotExist(err) {
		t.Errorf("task dir after Cleanup: %v", err)
	}
	if _, err := f.b.Status(ctx, id); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Status after Cleanup = %v, want ErrNotFound", err)
	}
}

// `docker stop` mid-run (Cancel): the runner gets SIGTERM through the init,
// pushes what the agent has done so far and writes an interrupted receipt;
// then the inner daemon, which the agent's Docker use started, stops
// cleanly.
func TestCancelPushesWorkSoFar(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{Harness: "command", Command: `docker version >/dev/null
echo partial > partial.txt
echo '{"type":"tool_use","tool":"write","input":{"filePath":"partial.txt"}}'
sleep 600`}
	spec := f.spec("T-5A0D0002", dispatch.ModeExecute, cfg)
	f.submit(t, ctx, spec)
	id := spec.Meta.TaskID
	w := wait(ctx, f.b, id)
	w.until(t, ctx, "the agent's write", toolIs("write"))
	if err := f.b.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	st := w.result(t)
	if st.State != dispatch.StateComplete {
		t.Fatalf("after Cancel: %+v", st)
	}
	res, err := f.b.Result(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusInterrupted {
		t.Fatalf("status = %s (%+v), want interrupted", res.Status, res.Error)
	}
	if got, ok := f.remote.File(t, spec.Order.TargetBranch, "partial.txt"); !ok || strings.TrimSpace(got) != "partial" {
		t.Fatalf("partial.txt on the remote = %q, %v: the work so far was not pushed", got, ok)
	}
	log := sandboxLog(t, id, spec.Meta.Mode)
	for _, want := range []string{`"signal":"terminated"`, `"message":"forwarding to the runner"`, `"message":"inner daemon stopped"`} {
		if !strings.Contains(log, want) {
			t.Errorf("sandbox log lacks %s", want)
		}
	}
	if strings.Contains(log, "did not stop cleanly") {
		t.Error("inner daemon was killed instead of stopping")
	}
}

// `docker kill` mid-run leaves pid files, sockets, libnetwork state and a
// service container behind in the container and its /var/lib/docker. The
// next start of the same container (what a Nomad restart does) must clean
// them up and come up with a healthy service again.
func TestKilledSandboxStartsCleanly(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{Harness: "command", Services: webService(f.svc), Command: `echo '{"type":"tool_use","tool":"wait"}'
sleep 600`}
	spec := f.spec("T-5A0D0003", dispatch.ModeExecute, cfg)
	f.submit(t, ctx, spec)
	id := spec.Meta.TaskID
	name := "sandbox-" + id + "-" + string(spec.Meta.Mode)

	w := wait(ctx, f.b, id)
	w.until(t, ctx, "the agent", toolIs("wait"))
	if out, err := exec.Command("docker", "kill", name).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v: %s", err, out)
	}
	if st := w.result(t); st.State != dispatch.StateComplete || st.ExitCode != 137 {
		t.Fatalf("after kill: %+v", st)
	}
	if _, err := f.b.Result(ctx, id); !errors.Is(err, dispatch.ErrNoResult) {
		t.Fatalf("a killed run left a receipt? %v", err)
	}
	if out, err := exec.Command("docker", "start", name).CombinedOutput(); err != nil {
		t.Fatalf("docker start: %v: %s", err, out)
	}
	w = wait(ctx, f.b, id)
	// The log holds both starts; wait for the second agent.
	for {
		w.until(t, ctx, "the agent", toolIs("wait"))
		if strings.Count(sandboxLog(t, id, spec.Meta.Mode), `"message":"runner started"`) >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the restarted sandbox never started its runner")
		case <-time.After(200 * time.Millisecond):
		}
	}
	log := sandboxLog(t, id, spec.Meta.Mode)
	for _, want := range []string{`"message":"stale state of a previous start removed"`, `"message":"service containers of a previous start removed"`} {
		if !strings.Contains(log, want) {
			t.Errorf("restart log lacks %s", want)
		}
	}
	if n := strings.Count(log, `"message":"service healthy"`); n != 2 {
		t.Errorf("service became healthy %d times, want once per start", n)
	}
	if err := f.b.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	w.result(t)
	if res, err := f.b.Result(ctx, id); err != nil || res.Status != dispatch.StatusInterrupted {
		t.Fatalf("result of the restarted run = %+v, %v", res, err)
	}
}

// Task mode: no inner daemon, no privileges, artifacts in the output dir.
func TestTaskModeIsUnprivileged(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: `id -u > uid.txt
grep CapEff /proc/self/status | awk '{print $2}' > caps.txt
if [ -e /var/run/docker.sock ]; then echo yes; else echo no; fi > docker.txt
echo 'Wrote the report.'`}
	spec := f.spec("T-5A0D0004", dispatch.ModeTask, cfg)
	spec.Order.CloneURL, spec.Order.TargetBranch, spec.Token = "", "", ""
	f.submit(t, ctx, spec)
	st := wait(ctx, f.b, spec.Meta.TaskID).result(t)
	res, err := f.b.Result(ctx, spec.Meta.TaskID)
	if err != nil || res.Status != dispatch.StatusCompleted || st.ExitCode != 0 {
		t.Fatalf("result = %+v, %v; status %+v", res, err, st)
	}
	for file, want := range map[string]string{"uid.txt": "1000", "caps.txt": "0000000000000000", "docker.txt": "no"} {
		b, err := os.ReadFile(filepath.Join(f.b.OutputDir(spec.Meta.TaskID), "artifacts", file))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	if len(res.Artifacts) != 3 {
		t.Errorf("artifacts = %v", res.Artifacts)
	}
}
