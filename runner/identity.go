package runner

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// AgentUser is the account the agent, and everything it starts (setup,
// checks, the dev server, the git commands that touch its checkout), runs
// as when that is not the runner's own. Inside a sandbox the init starts
// the runner as `runner` with CAP_SETUID/CAP_SETGID/CAP_KILL/CAP_CHOWN
// and the agent runs as `sandbox`: the agent cannot read the runner's
// files (token, work order, credential helper) nor its /proc entries.
// Outside a sandbox (the process backend, the CLI) there is no second uid:
// a nil *AgentUser runs everything as the runner.
type AgentUser struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
	Home     string
}

// LookupAgentUser finds name in the user database.
func LookupAgentUser(name string) (*AgentUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("agent user %q: %w", name, err)
	}
	a := &AgentUser{Name: name, Home: u.HomeDir}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("agent user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("agent user %q: gid %q: %w", name, u.Gid, err)
	}
	a.UID, a.GID = uint32(uid), uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("agent user %q: groups: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			a.Groups = append(a.Groups, uint32(n))
		}
	}
	return a, nil
}

// credential is nil for a nil user: the child runs as the runner.
func (a *AgentUser) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
}

// apply makes cmd run as the agent.
func (a *AgentUser) apply(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = a.credential()
}

// give hands path, which the runner made, to the agent.
func (a *AgentUser) give(path string) error {
	if a == nil {
		return nil
	}
	if err := os.Lchown(path, int(a.UID), int(a.GID)); err != nil {
		return fmt.Errorf("give %s to the agent user %s: %w", path, a.Name, err)
	}
	return nil
}
