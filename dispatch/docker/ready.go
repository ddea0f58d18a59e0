package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// capsArgs are the caps profile's grants: every capability but
// SYS_RESOURCE, seccomp and AppArmor unconfined.
var capsArgs = []string{
	"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined",
	"--security-opt", "apparmor=unconfined",
}

// IsolationArgs are the docker run flags of a coding sandbox's profile.
// The tests that run the image by hand use them too.
func IsolationArgs(iso dispatch.Isolation) []string {
	switch iso {
	case dispatch.IsolationPrivileged:
		return []string{"--privileged"}
	case dispatch.IsolationCaps:
		args := append(append([]string(nil), capsArgs...),
			// /proc/sys stays read-only without --privileged, so the
			// inner daemon cannot turn forwarding on itself.
			"--sysctl", "net.ipv4.ip_forward=1")
		// fuse-overlayfs is the inner daemon's second choice when
		// overlay2 cannot work; it needs the device.
		if _, err := os.Stat("/dev/fuse"); err == nil {
			args = append(args, "--device", "/dev/fuse")
		}
		return args
	case dispatch.IsolationGVisor:
		// The same grants, held by gVisor's kernel: the sandbox's /proc/sys
		// is gVisor's and writable by its root, and the host's /dev/fuse
		// means nothing there.
		return append([]string{"--runtime", dispatch.GVisorRuntime}, capsArgs...)
	}
	return nil
}

// readiness checks that runs can start: the engine answers, the image is
// there, and the host accepts the isolation profile.
type readiness struct {
	*engine
}

// Ready implements dispatch.ReadinessChecker: the engine answers, the
// sandbox image is there, and the host accepts the isolation profile (a
// throwaway container of the image with the profile's flags runs `true`;
// for gvisor, the image's runtime check, see gvisorReady).
func (b *readiness) Ready(ctx context.Context) []error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := b.cli.run(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return []error{fmt.Errorf("docker backend: no engine answers (%w): %w", dispatch.ErrUnavailable, err)}
	}
	if _, err := b.cli.run(ctx, "image", "inspect", "--format", "{{.Id}}", b.o.Image); err != nil {
		return []error{fmt.Errorf("docker backend: sandbox image %s is not on the engine (%w); build it with deploy/sandbox/build --local or set SANDBOX_IMAGE: %w",
			b.o.Image, dispatch.ErrImageMissing, err)}
	}
	if b.o.Isolation == dispatch.IsolationGVisor {
		if err := b.gvisorReady(ctx); err != nil {
			return []error{err}
		}
		return nil
	}
	args := append([]string{"run", "--rm", "--network", "none", "--entrypoint", "true"}, IsolationArgs(b.o.Isolation)...)
	if _, err := b.cli.run(ctx, append(args, b.o.Image)...); err != nil {
		return []error{fmt.Errorf("docker backend: the engine refused a %s container (%w); on hosts that refuse privileged containers set SANDBOX_ISOLATION=caps: %w",
			b.o.Isolation, dispatch.ErrIsolationRefused, err)}
	}
	return nil
}

// gvisorHowTo is what an operator does to give the engine gVisor.
const gvisorHowTo = "build runsc (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@<version>) and register it in /etc/docker/daemon.json as " +
	`"runtimes": {"runsc": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--net-raw", "--host-uds=create"]}}, then SIGHUP dockerd`

// gvisorReady runs the image's runtime check (`init --check-runtime`) in
// a throwaway container of the gvisor profile, with a directory of the
// data directory bound in: the engine knows the runtime, the kernel the
// sandbox sees is gVisor's, an iptables works there (runsc --net-raw),
// and a socket the sandbox makes in a bound directory is one the host can
// open (runsc --host-uds=create; the preview and screencast need it),
// while a socket the host makes there is not one the sandbox can open
// (--host-uds=open or all would let it).
func (b *readiness) gvisorReady(ctx context.Context) error {
	refused := func(format string, a ...any) error {
		return fmt.Errorf("docker backend: gvisor profile: %s (%w); %s", fmt.Sprintf(format, a...), dispatch.ErrIsolationRefused, gvisorHowTo)
	}
	dir, err := os.MkdirTemp(b.o.DataDir, "runtime-check-")
	if err != nil {
		return fmt.Errorf("docker backend: gvisor profile: %w", err)
	}
	defer os.RemoveAll(dir)
	host, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, dispatch.RuntimeCheckHostSocket), Net: "unix"})
	if err != nil {
		return fmt.Errorf("docker backend: gvisor profile: the host's socket for the runtime check: %w", err)
	}
	var reached atomic.Int32
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	args := append([]string{"run", "--rm", "--network", "none"}, IsolationArgs(dispatch.IsolationGVisor)...)
	args = append(args, "--mount", bind(dir, "/probe", false), b.o.Image, "--check-runtime", "/probe")
	out, err := b.cli.run(ctx, args...)
	host.Close()
	if line := reportLine(out, "host-socket"); reached.Load() > 0 || line == "opened" {
		return refused("the sandbox connected to a socket the host made, so it could talk to whatever listens in a directory bound into it " +
			"(runsc's --host-uds must be create, not open or all)")
	} else if err == nil && line == "" {
		return refused("the image's runtime check did not try the host's socket: the image %s is older than the bot; build it again (deploy/sandbox/build)", b.o.Image)
	}
	if strings.Contains(reportLine(out, "iptables"), "FAILED") {
		return refused("no iptables works in the sandbox, so its egress cannot be fenced (runsc needs --net-raw): %s", reportLine(out, "iptables"))
	}
	if err != nil {
		return refused("the engine could not run the image on the %s runtime: %v", dispatch.GVisorRuntime, err)
	}
	kernel := reportLine(out, "kernel")
	if !dispatch.GVisorKernel(kernel) {
		return refused("the %s runtime is not gVisor: the sandbox's kernel is %q, the host's own", dispatch.GVisorRuntime, kernel)
	}
	fi, err := os.Lstat(filepath.Join(dir, dispatch.RuntimeCheckSocket))
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode().Type() != fs.ModeSocket {
		return refused("a socket the sandbox makes does not reach the host, so the live preview and the screencast cannot work (runsc needs --host-uds=create)")
	}
	if err != nil {
		return fmt.Errorf("docker backend: gvisor profile: %w", err)
	}
	return nil
}

// reportLine is the value of the "name: value" line of a check's report.
func reportLine(report, name string) string {
	for _, l := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
