package docker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Artifacts implements dispatch.ArtifactReader: the files the run left in
// out/artifacts/ of its task directory. out/ is bind-mounted into the
// sandbox, so everything there is read as untrusted (no links, caps).
func (b *watcher) Artifacts(ctx context.Context, taskID string, caps dispatch.ArtifactCaps) (*dispatch.Artifacts, error) {
	if _, err := os.Stat(b.TaskDir(taskID)); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, dispatch.ErrNotFound)
	}
	if err := b.notRunning(ctx, taskID); err != nil {
		return nil, err
	}
	a, err := dispatch.ReadArtifacts(ctx, b.TaskDir(taskID), "out/"+dispatch.ArtifactsDir, caps)
	if err != nil {
		return nil, fmt.Errorf("docker backend: artifacts of %s: %w", taskID, err)
	}
	return a, nil
}
