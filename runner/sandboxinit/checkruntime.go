package sandboxinit

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// checkRuntime is `sandbox-runner init --check-runtime DIR`: what the
// bot's readiness check runs in a throwaway container of the gvisor
// profile. It prints the kernel's release (gVisor's own under gVisor,
// whatever the host runs), which iptables works (the fences need one: on
// gVisor, raw sockets, runsc --net-raw), and leaves a listening socket's
// name in dir; it also tries the host's socket in dir and says whether it
// connected (it must not: see dispatch.RuntimeCheckHostSocket). It exits non-zero when no iptables works or the socket
// cannot be made.
func checkRuntime(ctx context.Context, dir string, out io.Writer) int {
	say := func(k, format string, a ...any) { fmt.Fprintf(out, "%s: %s\n", k, fmt.Sprintf(format, a...)) }
	say("kernel", "%s", kernelRelease())
	code := 0
	nf, err := pickNetfilter(ctx, execIPTables, false)
	if err != nil {
		say("iptables", "FAILED: %v", err)
		code = 1
	} else {
		say("iptables", "%s", strings.Join(nf.reasons, "; "))
	}
	say("host-socket", "%s", dialHostSocket(filepath.Join(dir, dispatch.RuntimeCheckHostSocket)))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, dispatch.RuntimeCheckSocket), Net: "unix"})
	if err != nil {
		say("socket", "FAILED: %v", err)
		return 1
	}
	// The name stays for the host to find once the container is gone.
	l.SetUnlinkOnClose(false)
	l.Close()
	say("socket", "%s", filepath.Join(dir, dispatch.RuntimeCheckSocket))
	return code
}

// dialHostSocket is the host-socket line: "opened" when a socket the host
// made answers a connection from the sandbox.
func dialHostSocket(path string) string {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return "refused (" + err.Error() + ")"
	}
	c.Close()
	return "opened"
}
