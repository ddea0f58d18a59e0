package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenReader is a Backend that can give back the token a run holds now.
// The bot remembers the tokens it mints in memory; a bot process that
// follows a run it did not start (after a restart, or another replica's)
// reads the run's token here, so the run's end revokes it too.
type TokenReader interface {
	// CurrentToken returns the token the run's token file holds, "" for a
	// run without one, or ErrNotFound.
	CurrentToken(ctx context.Context, taskID string) (string, error)
}

// ReadTokenFile is CurrentToken for backends that keep a run's token at
// file inside its task directory dir: "" when the run has no token (task
// mode), ErrNotFound when the task directory is gone.
func ReadTokenFile(dir, file, taskID string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return "", ErrNotFound
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read token of %s: %w", taskID, err)
	}
	return strings.TrimSpace(string(raw)), nil
}
