// Package filelock is the per-issue lock of the backends that run on one
// machine (docker, process): one file per key in a directory that every bot
// replica on the machine shares.
package filelock

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Dir holds one lock file per key.
type Dir string

// path encodes the key (owner/repo#N, with / and # in it) as one file name.
// GitHub names are case-insensitive, so Owner/Repo and owner/repo share a
// lock.
func (d Dir) path(key string) string {
	return filepath.Join(string(d), url.PathEscape(strings.ToLower(key))+".lock")
}

// Lock takes key for holder, or returns the current holder and
// dispatch.ErrLocked. The file is created with its content in one step (a
// hard link of a written temporary file), so a replica sees either no lock
// or a complete holder, never an empty file. Taking a lock one holds
// succeeds.
func (d Dir) Lock(key, holder string) (string, error) {
	if key == "" || holder == "" {
		return "", fmt.Errorf("lock needs a key and a holder (got %q, %q)", key, holder)
	}
	p := d.path(key)
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return "", fmt.Errorf("lock %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(string(d), ".lock-*")
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
		cur, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // released between our link and our read
		}
		if err != nil {
			return "", fmt.Errorf("read lock %s: %w", key, err)
		}
		if string(cur) == holder {
			return holder, nil
		}
		return string(cur), dispatch.ErrLocked
	}
	return "", fmt.Errorf("lock %s: taken and released repeatedly while trying", key)
}

// Unlock releases key if holder holds it. It reports the other holder, if
// any, so the caller can log a release by a task that did not hold it.
func (d Dir) Unlock(key, holder string) (other string, err error) {
	p := d.path(key)
	cur, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lock %s: %w", key, err)
	}
	if string(cur) != holder {
		return string(cur), nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("unlock %s: %w", key, err)
	}
	return "", nil
}
