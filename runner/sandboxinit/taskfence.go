package sandboxinit

// The task sandbox's wall. A task-mode sandbox has no inner daemon and no
// privileges for the agent, but the egress defaults and the host wall
// hold it all the same: the backend starts it as root with
// dispatch.TaskFenceCaps alone and dispatch.EnvTaskFence naming the
// sandbox user. The init installs the deny chain as root, then becomes
// that user with an empty bounding set and no_new_privs and executes
// itself again, so the rest of the start, the runner and the agent run
// exactly as an unprivileged task sandbox always has, and nothing they
// start can gain a capability to change the rules. The second start reads
// envTaskFenced: "ok", or why the fence could not be installed, which it
// reports as the run's failure (as the sandbox user it can write the
// receipt; root without CAP_DAC_OVERRIDE may not).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// envTaskFenced is what the root half of a task sandbox's init hands the
// second: "ok", or the reason the fence is missing.
const envTaskFenced = "SANDBOX_INIT_TASK_FENCED"

const taskFencedOK = "ok"

// taskDrop is whom a task sandbox's init becomes after its fence.
type taskDrop struct {
	uid, gid int
}

func parseTaskDrop(v string) (taskDrop, error) {
	u, g, ok := strings.Cut(v, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return taskDrop{}, fmt.Errorf("%s=%q: want UID:GID of the sandbox user (not root)", dispatch.EnvTaskFence, v)
	}
	return taskDrop{uid: uid, gid: gid}, nil
}

// fenceTaskThenDrop is the root half of a task sandbox's init: it returns
// only when it could not become the sandbox user (the caller fails the
// run); otherwise it executes the init again as that user.
func fenceTaskThenDrop(ctx context.Context, log zerolog.Logger, value string) error {
	drop, err := parseTaskDrop(value)
	if err != nil {
		return err
	}
	defaults := &egressDefaults{log: log, ipv6: hasIPv6()}
	status := taskFencedOK
	if err := defaults.enforce(ctx, execIPTables); err != nil {
		status = err.Error()
		log.Error().Err(err).Msg("task sandbox: the fence could not be installed; the run fails as the sandbox user")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	env := dropEnv(os.Environ(), dispatch.EnvTaskFence, envTaskFenced)
	if ident := userEnv(drop.uid); ident != nil {
		env = append(dropEnv(env, "HOME", "USER", "LOGNAME"), ident...)
	}
	env = append(env, envTaskFenced+"="+status)
	log.Info().Int("uid", drop.uid).Int("gid", drop.gid).Msg("task sandbox: fenced; dropping every capability and running as the sandbox user")
	return execDropped(exe, os.Args, env, drop)
}

// execDropped executes argv as drop with an empty capability bounding set
// and no_new_privs. The bounding set is per thread, and the thread that
// calls execve is the one whose set the new program gets, so all of it
// happens on one locked thread (never unlocked: on success the process
// image is replaced; on failure the thread dies with its goroutine's end).
func execDropped(exe string, argv, env []string, drop taskDrop) error {
	runtime.LockOSThread()
	for c := 0; c <= unix.CAP_LAST_CAP+8; c++ {
		// Caps past the running kernel's last give EINVAL.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("empty the capability bounding set (the task sandbox needs CAP_SETPCAP): cap %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// Go applies these to every thread; leaving uid 0 clears the permitted
	// and effective sets.
	if err := syscall.Setgroups([]int{drop.gid}); err != nil {
		return fmt.Errorf("set groups to %d (the task sandbox needs CAP_SETGID): %w", drop.gid, err)
	}
	if err := syscall.Setgid(drop.gid); err != nil {
		return fmt.Errorf("become gid %d: %w", drop.gid, err)
	}
	if err := syscall.Setuid(drop.uid); err != nil {
		return fmt.Errorf("become uid %d (the task sandbox needs CAP_SETUID): %w", drop.uid, err)
	}
	return syscall.Exec(exe, argv, env)
}

// dropEnv is env without the variables names.
func dropEnv(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// userEnv is the identity Docker gives a container started as uid
// (started as root, it gave root's HOME): HOME, USER and LOGNAME from the
// image's passwd; nil when the image does not name uid.
func userEnv(uid int) []string {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil
	}
	return []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
}

// taskFenceResult is what the second start of a task sandbox's init does
// about the egress defaults, not being root: nil when the root half
// installed them, else why the run cannot go on.
func taskFenceResult(getenv func(string) string) error {
	switch v := getenv(envTaskFenced); v {
	case taskFencedOK:
		return nil
	case "":
		return errors.New("task mode started without root, so the init cannot fence off link-local addresses, the bot and the host " +
			"(the backend starts task sandboxes as root with " + strings.Join(dispatch.TaskFenceCaps(), ", ") + " and " + dispatch.EnvTaskFence + ")")
	default:
		return errors.New(v)
	}
}
