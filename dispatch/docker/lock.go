package docker

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch/filelock"
)

func (b *Backend) locks() filelock.Dir { return filelock.Dir(filepath.Join(b.o.DataDir, "locks")) }

// Lock implements dispatch.Backend with one file per key under the data
// directory, shared by every bot replica that shares the directory.
func (b *Backend) Lock(_ context.Context, key, holder string) (string, error) {
	h, err := b.locks().Lock(key, holder)
	if err != nil && h == "" {
		return "", fmt.Errorf("docker backend: %w", err)
	}
	return h, err
}

// Unlock implements dispatch.Backend.
func (b *Backend) Unlock(_ context.Context, key, holder string) error {
	other, err := b.locks().Unlock(key, holder)
	if err != nil {
		return fmt.Errorf("docker backend: %w", err)
	}
	if other != "" {
		b.log.Warn().Str("key", key).Str("holder", holder).Str("current", other).Msg("unlock by a task that does not hold the lock: left in place")
	}
	return nil
}
