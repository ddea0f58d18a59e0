package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// CurrentToken implements dispatch.TokenReader from the task directory.
func (b *taskFiles) CurrentToken(_ context.Context, taskID string) (string, error) {
	return dispatch.ReadTokenFile(b.TaskDir(taskID), filepath.Join("secrets", "token"), taskID)
}

// RefreshToken implements dispatch.Backend.
func (b *taskFiles) RefreshToken(ctx context.Context, taskID, token string) error {
	dir := b.TaskDir(taskID)
	if _, err := os.Stat(filepath.Join(dir, "secrets")); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("docker backend: refresh token of %s: %w", taskID, dispatch.ErrNotFound)
	}
	if st, err := b.runs.Status(ctx, taskID); err == nil && st.State.Ended() {
		// Writing it now would leave a live token for nobody.
		return fmt.Errorf("docker backend: refresh token of %s: the run has ended (%s); nothing written", taskID, st.State)
	}
	if err := b.writeToken(dir, token); err != nil {
		return fmt.Errorf("docker backend: %s: %w", taskID, err)
	}
	return nil
}
