package sandboxinit_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// These tests run the init inside the real sandbox image under the caps
// profile; dispatch/docker's tests run the whole sandbox with the runner.

var capsProfile = []string{"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined"}

func dockerRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}

// Storage driver detection picks what works and says why: overlay2 when
// /var/lib/docker is a bind to the host's filesystem, and the fallbacks
// when it is on the container's own overlay root.
func TestCheckPicksStorageDriver(t *testing.T) {
	img := testenv.SandboxImage(t)
	cases := []struct {
		name  string
		extra []string
		want  []string
	}{
		{"bind to the host filesystem", []string{"--mount", "type=bind,source=" + t.TempDir() + ",target=/var/lib/docker"},
			[]string{"storage driver: overlay2", "storage reason: overlay2: overlay mount on", "docker info: driver overlay2"}},
		{"overlay root without /dev/fuse", nil,
			[]string{"storage driver: vfs", "storage reason: overlay2 rejected: overlay mount on overlayfs", "fuse-overlayfs rejected: /dev/fuse is not usable", "docker info: driver vfs"}},
	}
	if _, err := os.Stat("/dev/fuse"); err == nil {
		cases = append(cases, struct {
			name  string
			extra []string
			want  []string
		}{"overlay root with /dev/fuse", []string{"--device", "/dev/fuse"},
			[]string{"storage driver: fuse-overlayfs", "storage reason: overlay2 rejected", "fuse-overlayfs: mount works", "docker info: driver fuse-overlayfs"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--rm"}, capsProfile...)
			args = append(append(args, c.extra...), img, "--check")
			out, err := dockerRun(t, args...)
			if err != nil {
				t.Fatalf("--check: %v\n%s", err, out)
			}
			for _, w := range append(c.want, "docker socket: none before the inner daemon", "cgroups: writable", "dockerd stop: clean", "result: ok") {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func writeOrder(t *testing.T, dir string, cfg sandboxcfg.Config) string {
	t.Helper()
	o := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-1A1F0001", Mode: dispatch.ModePlan, Attempt: 1,
		Repo: "acme/demo", Number: 3, CloneURL: "http://host.docker.internal:1/demo.git", Config: sandboxcfg.MustResolve(cfg), OutputDir: "/sandbox/out"}
	raw, _ := json.Marshal(o)
	p := filepath.Join(dir, "work-order.json")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cachedService puts the test service image where the init's image cache
// finds it.
func cachedService(t *testing.T) string {
	t.Helper()
	ref := dockertest.ServiceImage(t)
	cache := t.TempDir()
	dockertest.CacheImage(t, filepath.Join(cache, "images"), ref)
	return cache
}

func sandboxArgs(t *testing.T, order, out, cache string) []string {
	return sandboxArgsIn(t, capsProfile, order, out, cache)
}

// sandboxArgsIn is sandboxArgs with the given profile's flags
// (dockertest.Profile).
func sandboxArgsIn(t *testing.T, profile []string, order, out, cache string) []string {
	args := append([]string{"run"}, profile...)
	return append(args,
		"--mount", "type=bind,source="+t.TempDir()+",target=/var/lib/docker",
		"--mount", "type=bind,source="+order+",target=/sandbox/work-order.json,readonly",
		"--mount", "type=bind,source="+out+",target=/sandbox/out",
		"--mount", "type=bind,source="+cache+",target=/cache",
	)
}

func readResult(t *testing.T, out string) *dispatch.Result {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, dispatch.ResultFile))
	if err != nil {
		t.Fatalf("no receipt: %v", err)
	}
	r, err := dispatch.ParseResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A service that dies is reported at once, with its own last words, in a
// failed receipt the bot can post; the runner never starts.
func TestCrashingServiceFailsTheStart(t *testing.T) {
	img := testenv.SandboxImage(t)
	cache := cachedService(t)
	out := t.TempDir()
	order := writeOrder(t, t.TempDir(), sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
		"web": {Image: dockertest.ServiceImageRef, Ports: []int{8080}, Env: map[string]string{"CRASH": "1"}},
	}})
	args := append(sandboxArgs(t, order, out, cache), "--rm", img, "--", "touch", "/sandbox/out/runner-ran")
	logs, err := dockerRun(t, args...)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3 (sandbox start failed)\n%s", err, logs)
	}
	r := readResult(t, out)
	if r.Status != dispatch.StatusFailed || r.TaskID != "T-1A1F0001" {
		t.Errorf("receipt = %+v", r)
	}
	for _, w := range []string{"service web", "exited with code 1", "crashing as asked"} {
		if r.Error == nil || !strings.Contains(r.Error.Message, w) {
			t.Errorf("receipt error lacks %q: %+v", w, r.Error)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "runner-ran")); err == nil {
		t.Error("the runner ran although a service failed")
	}
}

// SIGTERM while a service is still starting ends the start at once with an
// interrupted receipt and a clean daemon stop, not after the grace period.
func TestStopDuringStart(t *testing.T) {
	img := testenv.SandboxImage(t)
	cache := cachedService(t)
	out := t.TempDir()
	order := writeOrder(t, t.TempDir(), sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
		"web": {Image: dockertest.ServiceImageRef, Ports: []int{8080}, Env: map[string]string{"DELAY_MS": "120000"},
			Healthcheck: &sandboxcfg.Healthcheck{HTTP: "/health", TimeoutSeconds: 300}},
	}})
	name := "sandbox-init-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	exec.Command("docker", "rm", "-f", name).Run()
	args := append(sandboxArgs(t, order, out, cache), "--detach", "--name", name, img, "--", "true")
	if logs, err := dockerRun(t, args...); err != nil {
		t.Fatalf("docker run: %v\n%s", err, logs)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	deadline := time.Now().Add(time.Minute)
	for {
		logs, _ := dockerRun(t, "logs", name)
		if strings.Contains(logs, "image loaded from the cache") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service never started:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if logs, err := dockerRun(t, "stop", "--time", "60", name); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, logs)
	}
	code, _ := dockerRun(t, "inspect", "--format", "{{.State.ExitCode}}", name)
	if strings.TrimSpace(code) != "143" {
		t.Errorf("exit code %s, want 143", code)
	}
	r := readResult(t, out)
	if r.Status != dispatch.StatusInterrupted || r.Error == nil || !strings.Contains(r.Error.Message, "stopped while the sandbox was starting") {
		t.Errorf("receipt = %+v %+v", r, r.Error)
	}
	logs, _ := dockerRun(t, "logs", name)
	if !strings.Contains(logs, `"message":"inner daemon stopped"`) {
		t.Errorf("no clean daemon stop in the log:\n%s", logs)
	}
}

// PID 1 reaps orphans: a background job whose parent exits is reparented
// to it and must not stay a zombie.
func TestPID1ReapsOrphans(t *testing.T) {
	img := testenv.SandboxImage(t)
	args := append([]string{"run", "--rm"}, capsProfile...)
	args = append(args, "--env", "SANDBOX_LOG_LEVEL=warn", img, "--",
		"sh", "-c", `sh -c 'sleep 0.2 &'; sleep 1; echo "zombies=$(ps -eo stat= | grep -c '^Z')"; echo "pid1=$(cat /proc/1/comm)"; id -un`)
	out, err := dockerRun(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"zombies=0", "pid1=sandbox-runner", "\nsandbox"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}
