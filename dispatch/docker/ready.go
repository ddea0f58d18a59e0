package docker

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// isolationArgs are the docker run flags of a coding sandbox's profile.
func isolationArgs(iso dispatch.Isolation) []string {
	switch iso {
	case dispatch.IsolationPrivileged:
		return []string{"--privileged"}
	case dispatch.IsolationCaps:
		args := []string{
			"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
			"--security-opt", "seccomp=unconfined",
			"--security-opt", "apparmor=unconfined",
			// /proc/sys stays read-only without --privileged, so the
			// inner daemon cannot turn forwarding on itself.
			"--sysctl", "net.ipv4.ip_forward=1",
		}
		// fuse-overlayfs is the inner daemon's second choice when
		// overlay2 cannot work; it needs the device.
		if _, err := os.Stat("/dev/fuse"); err == nil {
			args = append(args, "--device", "/dev/fuse")
		}
		return args
	}
	return nil
}

// Ready implements dispatch.ReadinessChecker: the engine answers, the
// sandbox image is there, and the host accepts the isolation profile (a
// throwaway container of the image with the profile's flags runs `true`).
func (b *Backend) Ready(ctx context.Context) []error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := b.cli.run(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return []error{fmt.Errorf("docker backend: no engine answers (%w): %w", dispatch.ErrUnavailable, err)}
	}
	if _, err := b.cli.run(ctx, "image", "inspect", "--format", "{{.Id}}", b.o.Image); err != nil {
		return []error{fmt.Errorf("docker backend: sandbox image %s is not on the engine (%w); build it with deploy/sandbox/build --local or set SANDBOX_IMAGE: %w",
			b.o.Image, dispatch.ErrImageMissing, err)}
	}
	args := append([]string{"run", "--rm", "--network", "none", "--entrypoint", "true"}, isolationArgs(b.o.Isolation)...)
	if _, err := b.cli.run(ctx, append(args, b.o.Image)...); err != nil {
		return []error{fmt.Errorf("docker backend: the engine refused a %s container (%w); on hosts that refuse privileged containers set SANDBOX_ISOLATION=caps: %w",
			b.o.Isolation, dispatch.ErrIsolationRefused, err)}
	}
	return nil
}
