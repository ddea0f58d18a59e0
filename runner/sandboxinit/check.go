package sandboxinit

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// check is `sandbox-runner init --check`: what an operator runs on a new
// host to see whether the sandbox image can host its daemon there, and why
// not. It prints one "name: result" line per step and exits non-zero when
// the inner dockerd does not come up.
func check(ctx context.Context, log zerolog.Logger, opts options, out io.Writer) int {
	say := func(k, format string, a ...any) { fmt.Fprintf(out, "%s: %s\n", k, fmt.Sprintf(format, a...)) }
	say("uid", "%d", os.Geteuid())
	say("kernel", "%s", kernelRelease())
	if os.Geteuid() != 0 {
		say("result", "not root: no sandbox can start here (coding sandboxes need the privileged or caps profile; "+
			"task sandboxes start as root with the fence's capabilities and drop them, see "+dispatch.EnvTaskFence+")")
		return 1
	}
	// Before anything of ours exists: a socket here would be the host's.
	if _, err := os.Stat(dockerSocket); err == nil {
		say("docker socket", "%s exists before the inner daemon started: the host's socket is mounted in, which a sandbox must never have", dockerSocket)
		return 1
	}
	say("docker socket", "none before the inner daemon (the host's is not mounted)")
	if err := prepareCgroups(log); err != nil {
		say("cgroups", "FAILED: %v", err)
		return 1
	}
	say("cgroups", "writable")
	if err := removeStaleState(log); err != nil {
		say("stale state", "FAILED: %v", err)
		return 1
	}
	if err := os.MkdirAll(dockerRoot, 0o711); err != nil {
		say("storage", "FAILED: %v", err)
		return 1
	}
	choice := chooseStorage(opts.storageDriver, dockerRoot, mountProber{})
	say("storage driver", "%s", choice.Driver)
	for _, r := range choice.Reasons {
		say("storage reason", "%s", r)
	}
	nf, err := pickNetfilter(ctx, execIPTables, true)
	if err != nil {
		say("iptables", "FAILED: %v", err)
		return 1
	}
	for _, r := range nf.reasons {
		say("iptables", "%s", r)
	}
	env, err := nf.daemonEnv()
	if err != nil {
		say("iptables", "FAILED: %v", err)
		return 1
	}
	start := time.Now()
	d, err := startDaemon(ctx, log, daemonConfig{Driver: choice.Driver, Timeout: opts.dockerdTimeout, Args: nf.daemonArgs(), Env: env})
	if err != nil {
		say("dockerd", "FAILED: %v", err)
		return 1
	}
	say("dockerd", "ready in %s", time.Since(start).Round(time.Millisecond))
	info, err := newDockerCLI(log).run(ctx, "info", "--format", "{{.Driver}} {{.CgroupVersion}}")
	if err != nil {
		say("docker info", "FAILED: %v", err)
	} else {
		f := strings.Fields(info)
		if len(f) == 2 {
			say("docker info", "driver %s, cgroup v%s", f[0], f[1])
		}
	}
	if err := d.stop(); err != nil {
		say("dockerd stop", "FAILED: %v", err)
		return 1
	}
	say("dockerd stop", "clean")
	say("result", "ok")
	return 0
}
