package sandboxinit

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// dockerCLI runs the docker client against the inner daemon. The init uses
// the CLI rather than the Engine API for the same reason an operator would:
// the commands in the log are the ones to type when something goes wrong.
type dockerCLI struct {
	bin string
	log zerolog.Logger
}

func newDockerCLI(log zerolog.Logger) dockerCLI { return dockerCLI{bin: "docker", log: log} }

// run returns the command's stdout; on failure the error carries the
// command line (never an env value: those go through --env-file) and stderr.
func (d dockerCLI) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d.log.Debug().Strs("args", args).Dur("took", time.Since(start)).Bool("ok", err == nil).Msg("docker")
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("docker %s: %w", strings.Join(args, " "), ctx.Err())
		}
		return stdout.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// combined returns stdout and stderr interleaved, for a container's logs
// (services write their complaints to stderr).
func (d dockerCLI) combined(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, d.bin, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
