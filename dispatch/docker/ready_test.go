package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// fakeDockerEnv makes this test binary a docker CLI (TestFakeDockerCLI).
const fakeDockerEnv = "SANDBOX_TEST_FAKE_DOCKER"

// TestFakeDockerCLI is not a test: run as the docker CLI by
// fakeDockerRuntime, it answers version and image inspect, and a `run` of
// the image's runtime check as a runtime of the kind the variable names.
func TestFakeDockerCLI(t *testing.T) {
	kind := os.Getenv(fakeDockerEnv)
	if kind == "" {
		t.Skip("a helper process, run as the docker CLI")
	}
	args := os.Args[slices.Index(os.Args, "--")+1:]
	if args[0] != "run" {
		fmt.Println("ok")
		os.Exit(0)
	}
	if kind == "unregistered" {
		fmt.Fprintln(os.Stderr, "docker: Error response from daemon: Unknown runtime specified runsc")
		os.Exit(125)
	}
	var dir string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "type=bind,source="); ok {
			dir, _, _ = strings.Cut(v, ",")
		}
	}
	kernel, code := "4.19.0-gvisor", 0
	if kind == "runc" {
		kernel = "6.1.0-18-amd64"
	}
	fmt.Println("kernel: " + kernel)
	switch kind {
	case "host-uds-open":
		// runsc --host-uds=open: the sandbox connects to the host's socket.
		c, err := net.Dial("unix", filepath.Join(dir, dispatch.RuntimeCheckHostSocket))
		if err != nil {
			fmt.Println("host-socket: refused (" + err.Error() + ")")
		} else {
			c.Close()
			fmt.Println("host-socket: opened")
		}
	case "old-image":
	default:
		fmt.Println("host-socket: refused (connect: permission denied)")
	}
	if kind == "no-net-raw" {
		fmt.Println("iptables: FAILED: no iptables works here: iptables-legacy-save -t filter: exit status 4: Permission denied (you must be root)")
		code = 1
	} else {
		fmt.Println("iptables: iptables-legacy: works")
	}
	if kind != "no-host-uds" {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, dispatch.RuntimeCheckSocket), Net: "unix"})
		if err != nil {
			fmt.Println("socket: FAILED:", err)
			os.Exit(1)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	os.Exit(code)
}

// fakeDockerRuntime is a docker CLI whose engine has a runtime of kind.
func fakeDockerRuntime(t *testing.T, kind string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "docker")
	script := fmt.Sprintf("#!/bin/sh\n%s=%s exec %q -test.run='^TestFakeDockerCLI$' -- \"$@\"\n", fakeDockerEnv, kind, os.Args[0])
	// Written by a child process: a file this process held open for
	// writing could still be open in a child another parallel test forks
	// at that moment (until that child execs), and running it would fail
	// with "text file busy".
	write := exec.Command("sh", "-c", `cat > "$1" && chmod 0755 "$1"`, "sh", p)
	write.Stdin = strings.NewReader(script)
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v\n%s", p, err, out)
	}
	return p
}

// The gvisor profile is ready only on gVisor with raw sockets and
// sockets offered to the host; each refusal says what is missing.
func TestGVisorReadiness(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		"gvisor":        "",
		"unregistered":  "could not run the image on the runsc runtime",
		"runc":          `the runsc runtime is not gVisor: the sandbox's kernel is "6.1.0-18-amd64"`,
		"no-net-raw":    "runsc needs --net-raw",
		"no-host-uds":   "runsc needs --host-uds=create",
		"host-uds-open": "--host-uds must be create, not open or all",
		"old-image":     "did not try the host's socket",
	} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := unitBackend(t, func(o *Options) { o.Docker, o.Isolation = fakeDockerRuntime(t, kind), dispatch.IsolationGVisor })
			errs := b.Ready(context.Background())
			if want == "" {
				if len(errs) > 0 {
					t.Fatalf("Ready = %v", errs)
				}
				return
			}
			if len(errs) != 1 || !errors.Is(errs[0], dispatch.ErrIsolationRefused) || !strings.Contains(errs[0].Error(), want) ||
				!strings.Contains(errs[0].Error(), "daemon.json") {
				t.Fatalf("Ready = %v, want an isolation refusal saying %q and how to register runsc", errs, want)
			}
			if left, _ := filepath.Glob(filepath.Join(b.o.DataDir, "runtime-check-*")); len(left) > 0 {
				t.Errorf("the check left %v in the data directory", left)
			}
		})
	}
}

// On the engine's real runsc (registered with --host-uds=create), the
// image's runtime check offers its socket to the host and cannot open the
// host's: the gvisor profile is ready.
func TestGVisorReadinessOnTheEngine(t *testing.T) {
	t.Parallel()
	testenv.Runsc(t)
	img := testenv.SandboxImage(t)
	b := unitBackend(t, func(o *Options) { o.Docker, o.Image, o.Isolation = "docker", img, dispatch.IsolationGVisor })
	if errs := b.Ready(context.Background()); len(errs) > 0 {
		t.Fatalf("Ready = %v", errs)
	}
}
