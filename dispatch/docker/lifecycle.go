package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// teardown stops runs and removes what they left.
type teardown struct {
	*engine
}

// Cancel implements dispatch.Backend: `docker stop -t <grace>`. The init
// passes SIGTERM to the runner, which pushes and writes its interrupted
// receipt; the engine kills what is left after the grace.
func (b *teardown) Cancel(ctx context.Context, taskID string) error {
	name, rec, err := b.lookup(ctx, taskID)
	if err != nil {
		return err
	}
	log := b.log.With().Str("task_id", taskID).Logger()
	if rec != nil {
		log = b.runLogger(rec.Meta)
	}
	grace := strconv.Itoa(int(b.o.StopGrace.Round(time.Second) / time.Second))
	log.Info().Str("container", name).Str("grace_seconds", grace).Msg("stopping sandbox")
	if _, err := b.cli.run(ctx, "stop", "--time", grace, name); err != nil {
		if errors.Is(err, errNoSuch) {
			return dispatch.ErrNotFound
		}
		return fmt.Errorf("docker backend: %w", err)
	}
	return nil
}

// Cleanup implements dispatch.Backend: the container and the task
// directory go. The inner daemon's files under docker/ belong to root (and
// out/ to the sandbox user); a bot that is not root removes them through a
// throwaway container of the sandbox image.
func (b *teardown) Cleanup(ctx context.Context, taskID string) error {
	if !dispatch.ValidTaskID(taskID) {
		return fmt.Errorf("docker backend: task id %q is not of the form T-XXXXXXXX", taskID)
	}
	b.ended.forget(taskID)
	name, _, err := b.lookup(ctx, taskID)
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		return err
	}
	if name != "" {
		if _, err := b.cli.run(ctx, "rm", "--force", "--volumes", name); err != nil && !errors.Is(err, errNoSuch) {
			return fmt.Errorf("docker backend: %w", err)
		}
	}
	_ = os.Remove(filepath.Join(b.o.DataDir, "submit", taskID+".lock"))
	dir := b.TaskDir(taskID)
	if err := os.RemoveAll(dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("docker backend: remove %s: %w", dir, err)
	}
	if _, err := b.cli.run(ctx, "run", "--rm", "--network", "none", "--user", "0:0",
		"--entrypoint", "find", "--mount", bind(dir, "/task", false),
		b.o.Image, "/task", "-mindepth", "1", "-delete"); err != nil {
		return fmt.Errorf("docker backend: remove the root-owned files of %s through a container: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("docker backend: remove %s: %w", dir, err)
	}
	return nil
}
