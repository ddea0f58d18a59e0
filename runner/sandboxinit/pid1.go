package sandboxinit

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// envChild marks the second process of the init. PID 1 re-executes itself
// with it set and does nothing but forward signals and reap.
const envChild = "SANDBOX_INIT_CHILD"

// forwarded are the signals PID 1 passes on to the init proper.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// runPID1 splits the init in two processes, the way tini does. As PID 1 we
// inherit every orphan in the container (containerd shims double-fork, agents
// leave background jobs behind) and must reap them, but a wait4(-1) loop in
// the same process as os/exec would steal the exit status of the commands
// the init runs itself. So PID 1 only forwards signals and reaps, and the
// init's real work happens in its single child, where os/exec works as usual.
func runPID1(args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-runner init: cannot find own executable: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	defer signal.Stop(sigs)

	child, err := os.StartProcess(exe, append([]string{exe, "init"}, args...), &os.ProcAttr{
		Env:   append(os.Environ(), envChild+"=1"),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-runner init: start %s: %v\n", exe, err)
		return 1
	}

	// A signal channel may drop a SIGCHLD when it is full; the ticker makes
	// sure a missed one only delays reaping.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				_ = child.Signal(sig)
				continue
			}
		case <-tick.C:
		}
		if code, done := reap(child.Pid); done {
			return code
		}
	}
}

// reap collects every exited process and reports the exit code of pid once
// it is among them.
func reap(pid int) (code int, done bool) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || got <= 0 {
			return code, done
		}
		if got == pid {
			done = true
			code = exitCode(ws)
		}
	}
}

func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}
