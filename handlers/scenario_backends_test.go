package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The result.json a hostile sandbox leaves: a link to /dev/zero, which
// never ends, and a 1 GiB sparse file, which costs the sandbox nothing.
var hostileResults = map[string]string{
	"symlink to /dev/zero": "ln -s /dev/zero %s",
	"1 GiB sparse file":    "truncate -s 1G %s",
}

// memoryDuring runs f and returns the bytes the whole test process
// allocated meanwhile (TotalAlloc: reading a huge file shows however short
// it lived), logging the heap in use before and after.
func memoryDuring(t *testing.T, f func()) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MiB while handling the run; heap in use %.1f -> %.1f MiB",
		float64(alloc)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))
	return alloc
}

// maxAlloc is far above what following one run costs (a few MiB) and far
// below what reading the hostile file would.
const maxAlloc = 64 << 20

// hostileRun labels an issue on a bot running on backend, lets the run end
// with a hostile result.json, and checks the issue gets a failure comment
// while the bot's memory stays flat.
func hostileRun(t *testing.T, h *harness, backend dispatch.Backend, env map[string]string, finish func(taskID string)) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot log:\n%s", h.logs.String())
		}
	})
	h.stop()
	alloc := memoryDuring(t, func() {
		h.startWith(backend, env)
		n := h.gh.AddIssue(testRepo, writer, "Greet", "")
		// A delivery id of its own: task ids (and container names) follow
		// from it, and must not meet a run of an earlier test.
		h.label(n, writer, fmt.Sprintf("d-hostile-%d", time.Now().UnixNano()))
		var taskID string
		h.gh.WaitFor(90*time.Second, "the run submitted", func() bool {
			runs, _ := backend.List(context.Background())
			if len(runs) > 0 {
				taskID = runs[0].Meta.TaskID
			}
			return taskID != ""
		})
		if finish != nil {
			finish(taskID)
		}
		waitFailed(h, n, 90*time.Second, `"kind":"failure"`, "does not accept")
	})
	if alloc > maxAlloc {
		t.Errorf("the bot allocated %d MiB for one hostile result.json (cap %d MiB)", alloc>>20, maxAlloc>>20)
	}
	if !strings.Contains(h.logs.String(), "result.json rejected") {
		t.Errorf("the log does not say the result was rejected:\n%s", h.logs.String())
	}
}

// The process backend: the "runner" is a script that leaves the hostile
// file where the real runner writes result.json, then fails.
func TestHostileResultJSONOnProcessBackend(t *testing.T) {
	for name, cmd := range hostileResults {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			script := filepath.Join(t.TempDir(), "hostile-runner")
			body := "#!/bin/sh\n" + strings.Replace(cmd, "%s", "out/result.json", 1) + "\nexit 1\n"
			if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := process.New(process.Options{Runner: script, DataDir: t.TempDir(), Warnings: &strings.Builder{}, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			hostileRun(t, h, b, nil, nil)
		})
	}
}

// The Nomad backend against the fake agent: the allocation's
// alloc/data/result.json is the hostile file, served by fs cat.
func TestHostileResultJSONOnNomadFake(t *testing.T) {
	for name, cmd := range hostileResults {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			fake := newNomadFake(t)
			b := nomadBackendOn(t, fake)
			hostileRun(t, h, b, nil, func(taskID string) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var jobID string
				for _, j := range []dispatch.Mode{dispatch.ModePlan} {
					jobID = nomad.JobID("sandbox-", taskID, j)
				}
				alloc, data := startOnFake(t, ctx, fake, jobID)
				if out, err := exec.Command("sh", "-c", strings.Replace(cmd, "%s", filepath.Join(data, "result.json"), 1)).CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if err := fake.FinishAlloc(alloc, 1); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// The docker backend with a real container: an image whose entrypoint
// leaves the hostile file in the bind-mounted out directory.
func TestHostileResultJSONOnDockerBackend(t *testing.T) {
	testenv.Long(t, "runs containers on the Docker engine")
	testenv.Docker(t)
	base := testenv.SandboxImage(t)
	for name, cmd := range hostileResults {
		t.Run(name, func(t *testing.T) {
			image := "sandbox-test/hostile-result:" + map[string]string{"symlink to /dev/zero": "link", "1 GiB sparse file": "sparse"}[name]
			dockerfile := "FROM " + base + "\nUSER 0\nENTRYPOINT [\"/bin/sh\", \"-c\", \"" + strings.Replace(cmd, "%s", "/sandbox/out/result.json", 1) + "; exit 1\"]\n"
			build := exec.Command("docker", "build", "-q", "-t", image, "-")
			build.Stdin = strings.NewReader(dockerfile)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("docker build: %v\n%s", err, out)
			}
			h := newHarness(t, nil, nil)
			hostileRun(t, h, dockerBackendFor(t, image), map[string]string{"SANDBOX_ISOLATION": "caps"}, nil)
		})
	}
}

// dockerBackendFor is a docker backend of image (caps profile) on a data
// directory of the test's, whose containers are removed when it ends.
func dockerBackendFor(t *testing.T, image string) *docker.Backend {
	t.Helper()
	data := t.TempDir()
	b, err := docker.New(docker.Options{Image: image, Isolation: dispatch.IsolationCaps, DataDir: data, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=org.sandbox-bot.data-dir="+data).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
	return b
}

// With SANDBOX_BACKEND unset and no Docker engine answering, the bot does
// not fall back to running agents as processes: it stays on the docker
// backend, reports not ready, and a label gets a failure comment.
func TestNoDockerEngineMeansNoProcessRun(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	h := newHarness(t, nil, nil)
	data := t.TempDir()
	vars := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret, "GITHUB_APP_PRIVATE_KEY": testKey,
		"SANDBOX_DATA_DIR": data, "SANDBOX_DISPATCH_DEADLINE": "300ms"}
	cfg, err := app.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	backend, closeBackend, err := app.NewBackend(t.Context(), cfg, zerolog.New(&logs))
	if err != nil {
		t.Fatalf("the bot must start without an engine (and say it is not ready): %v", err)
	}
	defer closeBackend()
	if backend.Name() != "docker" {
		t.Fatalf("backend %q: the bot fell back from docker", backend.Name())
	}
	if !strings.Contains(logs.String(), "no Docker engine reachable") {
		t.Errorf("the start log does not say why:\n%s", logs.String())
	}
	h.stop()
	// As cmd/sandbox-bot does: a failed reconcile at start is logged, and
	// the bot serves on.
	vars["GITHUB_V3_API_URL"] = h.gh.URL()
	if cfg, err = app.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	srv, err := app.NewServer(cfg, backend, zerolog.New(zerolog.SyncWriter(h.logs)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err == nil {
		t.Error("reconcile cannot list runs without an engine, yet Start reported no error")
	}
	h.srv, h.http = srv, httptest.NewServer(srv.Handler())
	t.Cleanup(h.stop)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d, want 503 without an engine", rec.Code)
	}
	n := h.gh.AddIssue(testRepo, writer, "Greet", "")
	h.label(n, writer, "d-nodocker")
	c := h.waitComment(n, "start failure comment", func(s string) bool { return strings.Contains(s, "could not start") })
	if !strings.Contains(c, "did not answer") {
		t.Errorf("comment:\n%s", c)
	}
	entries, _ := os.ReadDir(filepath.Join(data, "tasks"))
	if len(entries) != 0 {
		t.Errorf("a run was left on disk: %v", entries)
	}
	if !strings.Contains(h.logs.String(), "backend not ready") {
		t.Errorf("readiness not logged:\n%s", h.logs.String())
	}
}

// The docker backend asked to run an image the engine does not have: the
// issue is told at once (no retries: waiting does not build an image).
func TestDockerMissingImageReachesTheIssue(t *testing.T) {
	testenv.Long(t, "uses the Docker engine")
	testenv.Docker(t)
	h := newHarness(t, nil, nil)
	data := t.TempDir()
	b, err := docker.New(docker.Options{Image: "sandbox-test/no-such-image:0", Isolation: dispatch.IsolationCaps, DataDir: data, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.startWith(b, map[string]string{"SANDBOX_ISOLATION": "caps"})
	n := h.gh.AddIssue(testRepo, writer, "Greet", "")
	h.label(n, writer, fmt.Sprintf("d-noimage-%d", time.Now().UnixNano()))
	waitFailed(h, n, 60*time.Second, "could not start", "sandbox image is not available")
	if entries, _ := os.ReadDir(filepath.Join(data, "tasks")); len(entries) != 0 {
		t.Errorf("a failed submission left a task directory: %v", entries)
	}
	if !strings.Contains(h.logs.String(), "backend not ready") {
		t.Errorf("the start check did not log the missing image")
	}
}

// waitFailed waits, up to timeout (sandboxes are slow to start on a busy
// engine), for a bot comment on #n containing kind, checks it says want,
// and for the agent:failed label.
func waitFailed(h *harness, n int, timeout time.Duration, kind, want string) {
	h.t.Helper()
	var c string
	h.gh.WaitFor(timeout, "a comment with "+kind, func() bool {
		for _, b := range h.botComments(n) {
			if strings.Contains(b, kind) {
				c = b
				return true
			}
		}
		return false
	})
	if !strings.Contains(c, want) {
		h.t.Errorf("comment lacks %q:\n%s", want, c)
	}
	h.gh.WaitFor(10*time.Second, "agent:failed", func() bool { return hasLabel(h.gh.Issue(testRepo, n).Labels, "agent:failed") })
}
