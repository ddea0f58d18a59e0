package sandboxinit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit/dockerfilter"
)

// The agent's Docker: the init serves a filtering socket in front of the
// inner daemon and points DOCKER_HOST at it. The daemon's own socket is
// root's alone (dockerd --group root), so the filter is the only way in.
const (
	agentDockerSocket = defaultRuntimeDir + "/docker.sock"
	dockerStageDir    = defaultRuntimeDir + "/binds"
	// defaultWorkspace is the checkout directory when the sandbox's
	// environment names none: the filter must know it before the runner
	// runs, and a temporary directory of the runner's choosing is unknown.
	defaultWorkspace = "/workspace"
)

// agentDocker is the agent's Docker socket: the filter in front of the
// inner daemon, and the workspace it guards.
type agentDocker struct {
	opts options
	log  zerolog.Logger
	ipv6 bool // the agent may create IPv6 networks

	filter *dockerfilter.Filter // once started
}

// start starts the filter and adds DOCKER_HOST (and the workspace it
// guards) to env.
func (ad *agentDocker) start(env map[string]string) error {
	ws := os.Getenv(dispatch.EnvWorkspace)
	if ws == "" {
		ws = defaultWorkspace
		env[dispatch.EnvWorkspace] = ws
	}
	if err := ad.makeWorkspace(ws); err != nil {
		return err
	}
	f, err := dockerfilter.Start(dockerfilter.Config{
		Socket:    agentDockerSocket,
		Upstream:  dockerSocket,
		Workspace: ws,
		StageDir:  dockerStageDir,
		IPv6:      ad.ipv6,
		Log:       ad.log.With().Str("part", "docker-filter").Logger(),
	})
	if err != nil {
		return err
	}
	ad.filter = f
	env["DOCKER_HOST"] = "unix://" + agentDockerSocket
	return nil
}

// makeWorkspace creates the workspace for the account the runner runs as
// when it does not exist yet. The default workspace of a restarted sandbox
// (docker start after a kill) is emptied first, as a new container's is:
// the runner checks out afresh and cannot remove the agent's files itself.
func (ad *agentDocker) makeWorkspace(ws string) error {
	if !filepath.IsAbs(ws) {
		return fmt.Errorf("%s=%q: want an absolute path", dispatch.EnvWorkspace, ws)
	}
	if isDir(ws) && ws != defaultWorkspace {
		return nil
	}
	if err := os.RemoveAll(ws); err != nil {
		return fmt.Errorf("empty the workspace %s of a previous start: %w", ws, err)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return fmt.Errorf("create the workspace %s: %w", ws, err)
	}
	// The runner makes its state and the agent's checkout in it, when the
	// image gives the runner an account of its own; a command that replaces
	// the runner (debugging, tests) runs as the agent and gets it.
	a, err := lookupAccount(ad.opts.user)
	if err != nil {
		return err
	}
	if r, err := lookupAccount(dispatch.RunnerUser); err == nil && len(ad.opts.command) == 0 {
		a = r
	}
	if err := os.Lchown(ws, a.UID, a.GID); err != nil {
		return fmt.Errorf("give the workspace %s to %s: %w", ws, a.Name, err)
	}
	return nil
}

func (ad *agentDocker) stop() {
	if ad.filter == nil {
		return
	}
	if err := ad.filter.Close(); err != nil {
		ad.log.Warn().Err(err).Msg("docker filter did not stop cleanly")
	}
	ad.filter = nil
}
