package process

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// tokenFiles are a run's token file, secrets/token in its task directory:
// the bot rewrites it while the run lives and reads it back
// (dispatch.TokenReader).
type tokenFiles struct {
	*tasks
}

// CurrentToken implements dispatch.TokenReader from the task directory.
func (b *tokenFiles) CurrentToken(_ context.Context, taskID string) (string, error) {
	return dispatch.ReadTokenFile(b.TaskDir(taskID), tokenFile, taskID)
}

// RefreshToken implements dispatch.Backend. The rename is atomic, so the
// runner's credential helper reads either the old or the new token.
func (b *tokenFiles) RefreshToken(_ context.Context, taskID, token string) error {
	if token == "" {
		return errors.New("process backend: refresh with an empty token")
	}
	st, err := b.status(taskID)
	if err != nil {
		return err
	}
	if st.State.Ended() {
		// Writing it now would leave a live token for nobody.
		return fmt.Errorf("process backend: refresh token of %s: the run has ended (%s); nothing written", taskID, st.State)
	}
	if err := writeAtomic(filepath.Join(b.TaskDir(taskID), tokenFile), []byte(token), 0o600); err != nil {
		return fmt.Errorf("process backend: refresh token of %s: %w", taskID, err)
	}
	return nil
}
