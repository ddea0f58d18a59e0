// Package testenv finds the real tools tests drive (the Docker engine, the
// pinned npm CLIs, Chromium, the sandbox image) and decides what happens when
// one is missing: a loud skip on a developer's machine, a failure in CI
// (CI=true), where .ci/run installs all of them.
package testenv

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultSandboxImage is the tag deploy/sandbox/build --local produces.
const DefaultSandboxImage = "sandbox-bot/sandbox:local"

// InCI reports whether missing tools must fail tests instead of skipping them.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t loudly, or fails it in CI.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available: %s", what, how)
	if InCI() {
		t.Fatalf("CI=true and %s (.ci/run installs it)", msg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s: %s ***\n\n", t.Name(), msg)
	t.Skipf("SKIPPED LOUDLY: %s", msg)
}

// Long skips t under -short: it starts the Docker engine, a real agent CLI,
// Chromium or another program that takes seconds, and the fast tier
// (go test -short ./...) leaves those to the full suite (.ci/run).
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s; the full suite runs it", what)
	}
}

// HandRun skips t unless the variable env is 1: a load test a person runs
// by hand (how says the command), which neither tier runs because its
// figures mean something only on a quiet machine. With Long and Missing it
// is the one way tests choose their tier.
func HandRun(t testing.TB, env, how string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("run by hand: %s=1 %s", env, how)
	}
}

// ModuleRoot is the directory holding go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Docker requires a reachable Docker engine.
func Docker(t testing.TB) {
	t.Helper()
	Long(t, "starts containers on the Docker engine")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		Missing(t, "a Docker engine", strings.TrimSpace(string(out))+" (install docker.io and start dockerd)")
	}
}

// Runsc requires gVisor's runtime registered with the local engine as
// runsc, which the gvisor isolation profile runs sandboxes on, and
// returns its name.
func Runsc(t testing.TB) string {
	t.Helper()
	Docker(t)
	if ok, runtimes := HasRunsc(); !ok {
		Missing(t, "gVisor's runtime runsc on the Docker engine (docker info lists "+runtimes+")",
			"build it static from gVisor's Go module (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@$RUNSC_VERSION, the version .ci/run pins) "+
				`and register it in /etc/docker/daemon.json as "runtimes": {"runsc": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--net-raw", "--host-uds=create"]}}, then SIGHUP dockerd (.ci/run does both)`)
	}
	return "runsc"
}

// HasRunsc reports whether the local engine has gVisor's runtime, and the
// runtimes it has: for a hand-run comparison that measures what it can.
func HasRunsc() (bool, string) {
	out, err := exec.Command("docker", "info", "--format", "{{range $name, $_ := .Runtimes}}{{$name}} {{end}}").CombinedOutput()
	return err == nil && slices.Contains(strings.Fields(string(out)), "runsc"), strings.TrimSpace(string(out))
}

// SandboxImage requires the sandbox image in the local engine and returns
// its reference ($SANDBOX_TEST_IMAGE, else the --local build's tag).
func SandboxImage(t testing.TB) string {
	t.Helper()
	Docker(t)
	img := os.Getenv("SANDBOX_TEST_IMAGE")
	if img == "" {
		img = DefaultSandboxImage
	}
	if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
		Missing(t, "the sandbox image "+img, "run deploy/sandbox/build --local")
	}
	return img
}

// NPMBin returns the path of a CLI installed by `npm ci` at the module root
// (node_modules/.bin/NAME).
func NPMBin(t testing.TB, name string) string {
	t.Helper()
	Long(t, "runs the real "+name+" CLI")
	p := filepath.Join(ModuleRoot(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "the npm CLI "+name, "run `npm install` at the repository root")
	}
	return p
}

// NPMPackageDir returns node_modules/NAME at the module root.
func NPMPackageDir(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(ModuleRoot(t), "node_modules", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "the npm package "+name, "run `npm install` at the repository root")
	}
	return p
}

// Chromium returns the path of a headless-capable Chromium.
func Chromium(t testing.TB) string {
	t.Helper()
	Long(t, "starts Chromium")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "Chromium", "apt-get install chromium")
	return ""
}

// Binary requires a program on PATH.
func Binary(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, install)
	}
	return p
}

// builds caches the binaries built by BuildCommand for the test binary's
// lifetime: building a command takes seconds, and many tests need one.
var builds = struct {
	sync.Mutex
	paths map[string]string
}{paths: map[string]string{}}

// BuildCommand builds ./cmd/NAME of this module once per test binary and
// returns the executable's path.
//
// Every test binary of one checkout builds into the same directory, under
// a file lock: only the first package of a `go test ./...` builds it, and
// the others find it current by its source stamp (sourceStamp) without
// starting go. A rebuild replaces the file by rename, so a test still
// running the old one is not disturbed.
func BuildCommand(t testing.TB, name string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if p, ok := builds.paths[name]; ok {
		return p
	}
	root := ModuleRoot(t)
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sandbox-bot-test-bin-%d-%x", os.Getuid(), sha256.Sum256([]byte(root))))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("build ./cmd/%s: %v", name, err)
	}
	unlock, err := lockFile(filepath.Join(dir, name+".lock"))
	if err != nil {
		t.Fatalf("build ./cmd/%s: %v", name, err)
	}
	defer unlock()
	p := filepath.Join(dir, name)
	// The stamp is taken before the build, so a file changed meanwhile
	// makes the next test build again (sourceStamp).
	stamp, err := sourceStamp(root)
	if err != nil {
		t.Fatalf("build ./cmd/%s: %v", name, err)
	}
	if b, err := os.ReadFile(p + ".stamp"); err == nil && string(b) == stamp {
		if _, err := os.Stat(p); err == nil {
			builds.paths[name] = p
			return p
		}
	}
	cmd := exec.Command("go", "build", "-o", p, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	if err := os.WriteFile(p+".stamp", []byte(stamp), 0o600); err != nil {
		t.Fatalf("build ./cmd/%s: %v", name, err)
	}
	builds.paths[name] = p
	return p
}

// lockFile takes an exclusive flock on path, waiting for other processes
// that hold it, and returns the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// LoadAverage is the machine's load average over 1, 5 and 15 minutes, for
// a benchmark or load test to print beside its figures.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
