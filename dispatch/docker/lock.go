package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// lockPath encodes the key (owner/repo#N, with / and # in it) as one file
// name. GitHub names are case-insensitive, so Owner/Repo and owner/repo
// share a lock.
func (b *Backend) lockPath(key string) string {
	return filepath.Join(b.o.DataDir, "locks", url.PathEscape(strings.ToLower(key))+".lock")
}

// Lock implements dispatch.Backend with one file per key, created with its
// content in one step (a hard link of a written temporary file), so every
// bot replica sharing the data directory sees either no lock or a complete
// holder, never an empty file.
func (b *Backend) Lock(_ context.Context, key, holder string) (string, error) {
	if key == "" || holder == "" {
		return "", fmt.Errorf("docker backend: lock needs a key and a holder (got %q, %q)", key, holder)
	}
	p := b.lockPath(key)
	tmp, err := os.CreateTemp(filepath.Dir(p), ".lock-*")
	if err != nil {
		return "", fmt.Errorf("docker backend: lock %s: %w", key, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(holder); err != nil {
		tmp.Close()
		return "", fmt.Errorf("docker backend: lock %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("docker backend: lock %s: %w", key, err)
	}
	err = os.Link(tmp.Name(), p)
	if err == nil {
		return holder, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("docker backend: lock %s: %w", key, err)
	}
	cur, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		// Released between our link and our read: try once more.
		if err := os.Link(tmp.Name(), p); err == nil {
			return holder, nil
		}
		cur, err = os.ReadFile(p)
	}
	if err != nil {
		return "", fmt.Errorf("docker backend: read lock %s: %w", key, err)
	}
	if string(cur) == holder {
		return holder, nil
	}
	return string(cur), dispatch.ErrLocked
}

// Unlock implements dispatch.Backend.
func (b *Backend) Unlock(_ context.Context, key, holder string) error {
	p := b.lockPath(key)
	cur, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker backend: read lock %s: %w", key, err)
	}
	if string(cur) != holder {
		b.log.Warn().Str("key", key).Str("holder", holder).Str("current", string(cur)).Msg("unlock by a task that does not hold the lock: left in place")
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("docker backend: unlock %s: %w", key, err)
	}
	return nil
}
