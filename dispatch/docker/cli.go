package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// cli runs the docker client. The backend drives the engine through the CLI
// rather than the Engine API: it honours the operator's DOCKER_HOST, docker
// context and TLS settings as they are, it works with any engine from 20.10
// on (the Go SDK of current releases refuses API versions below 1.44), it
// adds no dependency tree to the bot, and every call in the log is a command
// an operator can paste to look at the same thing.
type cli struct {
	bin string
}

// errNoSuch is the engine's answer for a container that does not exist.
var errNoSuch = errors.New("no such container")

// errConflict is the engine's answer to a name already in use.
var errConflict = errors.New("container name already in use")

func (c cli) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("docker %s: %w", describe(args), ctx.Err())
	}
	msg := strings.TrimSpace(stderr.String())
	switch {
	case strings.Contains(msg, "No such container"), strings.Contains(msg, "No such object"):
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", describe(args), errNoSuch, msg)
	case strings.Contains(msg, "is already in use"):
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", describe(args), errConflict, msg)
	}
	if class := classify(msg); class != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", describe(args), class, msg)
	}
	if msg == "" {
		msg = err.Error()
	}
	return stdout.String(), fmt.Errorf("docker %s: %s", describe(args), msg)
}

// describe names a docker call for an error without its full argument
// list (mount paths and labels make it long, and nothing secret is ever an
// argument, but brevity helps the reader).
func describe(args []string) string {
	if len(args) == 0 {
		return ""
	}
	last := args[len(args)-1]
	if len(args) == 1 {
		return args[0]
	}
	return args[0] + " … " + last
}

// classify tells the engine's answers the bot explains to people apart:
// no engine, no image, a refused isolation profile.
func classify(msg string) error {
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("Cannot connect to the Docker daemon", "error during connect", "Is the docker daemon running"):
		return dispatch.ErrUnavailable
	case has("Unable to find image", "No such image", "pull access denied", "manifest unknown", "repository does not exist"):
		return dispatch.ErrImageMissing
	case has("unable to apply caps", "privileged mode is disabled", "Unknown runtime specified", "unknown or invalid runtime name"):
		return dispatch.ErrIsolationRefused
	}
	return nil
}
