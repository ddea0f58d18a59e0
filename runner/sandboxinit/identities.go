package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// runnerDir is the runner's own directory (0700): its copy of the work
// order and, moved there from where the backend put them, the token's
// directory. The agent cannot traverse it.
const runnerDir = "/run/sandbox-runner"

// runnerCaps are what the runner needs beyond its own uid: CAP_SETUID and
// CAP_SETGID to start the agent (and setup, checks, dev server) as the
// agent user, CAP_KILL to stop the agent's process group, CAP_CHOWN to
// hand the agent its checkout. They are raised as ambient capabilities so
// they survive the exec of the runner; the runner clears its ambient and
// inheritable sets at once (runner.dropInheritableCaps), so none of them
// reaches the agent.
var runnerCaps = []uintptr{capChown, capKill, capSetGID, capSetUID}

const (
	capChown  = 0
	capKill   = 5
	capSetGID = 6
	capSetUID = 7
)

// identities gives the runner and the agent their files: the agent what
// it must write (handOver), the runner what only it may read
// (separateRunner).
type identities struct {
	opts  options
	log   zerolog.Logger
	order *dispatch.WorkOrder
}

// runnerIdentity is how the runner is started when it has a uid of its own.
type runnerIdentity struct {
	acct account
	env  map[string]string // on top of the runner's environment
}

// separateRunner gives the runner its own identity, apart from the agent
// (agent): only the runner can read the token, the work order and what it
// writes for itself. It returns nil when the image has no runner user (an
// older image), in which case the runner and the agent share the agent's
// uid as before. Called as root, before the runner starts.
func (ids identities) separateRunner(agent account) (*runnerIdentity, error) {
	acct, err := lookupAccount(dispatch.RunnerUser)
	if err != nil {
		ids.log.Warn().Err(err).Msg("the image has no runner user: the runner and the agent share a uid, and the agent can read the token")
		return nil, nil
	}
	if acct.UID == agent.UID {
		return nil, fmt.Errorf("the runner user %s and the agent user %s have the same uid %d", acct.Name, agent.Name, acct.UID)
	}
	if err := os.MkdirAll(runnerDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", runnerDir, err)
	}
	if err := ownPrivately(runnerDir, acct, 0o700); err != nil {
		return nil, err
	}
	id := &runnerIdentity{acct: acct, env: map[string]string{dispatch.EnvAgentUser: agent.Name}}
	if ids.order == nil {
		return id, nil
	}
	order := *ids.order
	if order.TokenFile != "" {
		dir, err := hideDir(filepath.Dir(order.TokenFile), filepath.Join(runnerDir, "secrets"), acct)
		if err != nil {
			return nil, fmt.Errorf("keep the token from the agent: %w", err)
		}
		order.TokenFile = filepath.Join(dir, filepath.Base(order.TokenFile))
	}
	// The runner's copy, which names the token where it now is. The
	// original is then hidden: it may hold secrets of the run.
	copyPath := filepath.Join(runnerDir, "work-order.json")
	b, err := json.Marshal(order)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(copyPath, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.Chown(copyPath, acct.UID, acct.GID); err != nil {
		return nil, fmt.Errorf("give %s to %s: %w", copyPath, acct.Name, err)
	}
	if err := hideFile(ids.opts.workOrder, acct); err != nil {
		return nil, fmt.Errorf("keep the work order from the agent: %w", err)
	}
	id.env[dispatch.EnvWorkOrder] = copyPath
	// The runner writes the receipt and the media; the agent has no
	// business writing there.
	if order.OutputDir != "" {
		if err := os.Lchown(order.OutputDir, acct.UID, acct.GID); err != nil {
			return nil, fmt.Errorf("give output dir %s to %s: %w", order.OutputDir, acct.Name, err)
		}
	}
	ids.log.Info().Str("runner_user", acct.Name).Str("agent_user", agent.Name).Msg("runner and agent separated")
	return id, nil
}

// hideDir makes dir reachable by the runner only and returns where it is
// now. A directory the backend bind-mounted (docker's secrets/, Nomad's
// secrets/) is bind-mounted again inside runnerDir and unmounted where it
// was: the host still replaces the token in it by rename, and the runner
// sees each new token at once. A plain directory is handed to the runner.
func hideDir(dir, dst string, acct account) (string, error) {
	mounted, err := isMountPoint(dir)
	if err != nil {
		return "", err
	}
	if !mounted {
		if err := ownPrivately(dir, acct, 0o700); err != nil {
			return "", err
		}
		return dir, nil
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return "", err
	}
	if already, _ := isMountPoint(dst); !already {
		if err := syscall.Mount(dir, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return "", fmt.Errorf("bind %s to %s: %w", dir, dst, err)
		}
	}
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return "", fmt.Errorf("unmount %s: %w", dir, err)
	}
	return dst, nil
}

// hideFile takes file out of the agent's reach: unmounted when the
// backend bind-mounted it, else owned by the runner and 0600.
func hideFile(file string, acct account) error {
	if file == "" {
		return nil
	}
	mounted, err := isMountPoint(file)
	if err != nil {
		return err
	}
	if mounted {
		if err := syscall.Unmount(file, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", file, err)
		}
		// The runtime made an empty file to mount on; it goes too, so
		// nothing at the old path suggests there is anything to read.
		if err := os.Remove(file); err != nil {
			_ = os.Chmod(file, 0)
		}
		return nil
	}
	if err := ownPrivately(file, acct, 0o600); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return nil
}

func ownPrivately(path string, acct account, mode os.FileMode) error {
	if err := os.Lchown(path, acct.UID, acct.GID); err != nil {
		return fmt.Errorf("give %s to %s: %w", path, acct.Name, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// isMountPoint reports whether path is a mount point of this mount
// namespace.
func isMountPoint(path string) (bool, error) {
	mounts, err := readMounts()
	if err != nil {
		return false, err
	}
	clean := filepath.Clean(path)
	for _, m := range mounts {
		if m.MountPoint == clean {
			return true, nil
		}
	}
	return false, nil
}
