package sandboxinit

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
)

// account is the unprivileged user the runner and the agent run as.
type account struct {
	Name   string
	UID    int
	GID    int
	Groups []int
	Home   string
}

func lookupAccount(name string) (account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return account{}, fmt.Errorf("look up user %q (the image creates it): %w", name, err)
	}
	a := account{Name: name, Home: u.HomeDir}
	if a.UID, err = strconv.Atoi(u.Uid); err != nil {
		return account{}, fmt.Errorf("user %q: uid %q: %w", name, u.Uid, err)
	}
	if a.GID, err = strconv.Atoi(u.Gid); err != nil {
		return account{}, fmt.Errorf("user %q: gid %q: %w", name, u.Gid, err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return account{}, fmt.Errorf("user %q: groups: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.Atoi(g); err == nil {
			a.Groups = append(a.Groups, n)
		}
	}
	return a, nil
}

func (a account) credential() *syscall.Credential {
	groups := make([]uint32, 0, len(a.Groups))
	for _, g := range a.Groups {
		groups = append(groups, uint32(g))
	}
	return &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}
}

// childEnv is the runner's environment: the sandbox's own (which carries
// the secrets given to the run) with the init's private variables removed
// and the user's identity and the sandbox's additions set.
func childEnv(base []string, acct *account, extra map[string]string) []string {
	drop := map[string]bool{envChild: true, envTaskFenced: true}
	if acct != nil {
		for _, k := range []string{"HOME", "USER", "LOGNAME", "SHELL"} {
			drop[k] = true
		}
	}
	for k := range extra {
		drop[k] = true
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	if acct != nil {
		env = append(env, "HOME="+acct.Home, "USER="+acct.Name, "LOGNAME="+acct.Name, "SHELL=/bin/bash")
	}
	for _, k := range sortedNames(extra) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// child is the runner process.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// startChild starts argv as acct (nil: as ourselves), with the ambient
// capabilities caps, and with the container's stdout and stderr so
// progress lines reach the log unbuffered.
func startChild(log zerolog.Logger, argv []string, env []string, dir string, acct *account, caps []uintptr) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Its own process group, so that the init decides who gets a signal:
	// the runner needs SIGTERM to push, the daemon must outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if acct != nil {
		cmd.SysProcAttr.Credential = acct.credential()
		cmd.SysProcAttr.AmbientCaps = caps
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.code = 0
		if err != nil {
			c.code = 1
			if ee, ok := err.(*exec.ExitError); ok {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
					c.code = exitCode(ws)
				}
			} else {
				log.Error().Err(err).Msg("wait for the runner")
			}
		}
		close(c.done)
	}()
	return c, nil
}
