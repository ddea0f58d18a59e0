package process

import (
	"context"
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Artifacts implements dispatch.ArtifactReader: the files the run left in
// out/artifacts/ of its task directory, read as untrusted (no links, caps).
func (b *runWatch) Artifacts(ctx context.Context, taskID string, caps dispatch.ArtifactCaps) (*dispatch.Artifacts, error) {
	st, err := b.status(taskID)
	if err != nil {
		return nil, err
	}
	if !st.State.Ended() {
		return nil, fmt.Errorf("process backend: artifacts of %s: the run is %s: %w", taskID, st.State, dispatch.ErrRunning)
	}
	a, err := dispatch.ReadArtifacts(ctx, b.TaskDir(taskID), outDir+"/"+dispatch.ArtifactsDir, caps)
	if err != nil {
		return nil, fmt.Errorf("process backend: artifacts of %s: %w", taskID, err)
	}
	return a, nil
}
