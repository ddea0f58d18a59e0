// Package filelock is the per-issue lock of the backends that run on one
// machine (docker, process): one file per key in a directory that every bot
// replica on the machine shares. It is their dispatch.Locker.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Locks holds one lock file per key in a directory.
type Locks struct {
	dir string
	log zerolog.Logger
}

var _ dispatch.Locker = (*Locks)(nil)

// New returns the locks kept in dir; log receives releases by a task that
// did not hold the lock.
func New(dir string, log zerolog.Logger) *Locks {
	return &Locks{dir: dir, log: log}
}

// path encodes the key (owner/repo#N, with / and # in it) as one file name.
// GitHub names are case-insensitive, so Owner/Repo and owner/repo share a
// lock.
func (l *Locks) path(key string) string {
	return filepath.Join(l.dir, url.PathEscape(strings.ToLower(key))+".lock")
}

// Lock implements dispatch.Locker. The file is created with its content in
// one step (a hard link of a written temporary file), so a replica sees
// either no lock or a complete holder, never an empty file.
func (l *Locks) Lock(_ context.Context, key, holder string) (string, error) {
	if key == "" || holder == "" {
		return "", fmt.Errorf("lock needs a key and a holder (got %q, %q)", key, holder)
	}
	p := l.path(key)
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return "", fmt.Errorf("lock %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(l.dir, ".lock-*")
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", key, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(holder); err != nil {
		tmp.Close()
		return "", fmt.Errorf("lock %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("lock %s: %w", key, err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		err = os.Link(tmp.Name(), p)
		if err == nil {
			return holder, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("lock %s: %w", key, err)
		}
		cur, err := l.read(key)
		if err != nil {
			return "", err
		}
		if cur == "" {
			continue // released between our link and our read
		}
		if cur == holder {
			return holder, nil
		}
		return cur, fmt.Errorf("lock %s is held by %s: %w", key, cur, dispatch.ErrLocked)
	}
	return "", fmt.Errorf("lock %s (%s): taken and released repeatedly while trying", key, p)
}

// Unlock implements dispatch.Locker.
func (l *Locks) Unlock(_ context.Context, key, holder string) error {
	cur, err := l.read(key)
	if err != nil || cur == "" {
		return err
	}
	if cur != holder {
		l.log.Warn().Str("key", key).Str("holder", holder).Str("current", cur).Msg("unlock by a task that does not hold the lock: left in place")
		return nil
	}
	if err := os.Remove(l.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unlock %s: %w", key, err)
	}
	return nil
}

// Holder implements dispatch.Locker.
func (l *Locks) Holder(_ context.Context, key string) (string, error) {
	return l.read(key)
}

// read returns the holder written in key's file, or "" if there is none.
func (l *Locks) read(key string) (string, error) {
	cur, err := os.ReadFile(l.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lock %s: %w", key, err)
	}
	return string(cur), nil
}
