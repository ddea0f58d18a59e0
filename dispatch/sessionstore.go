package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SessionKeeper is a Backend that can carry a plan run's agent session to
// the run that executes the plan: the docker and process backends keep
// the archive in their data directory, the Nomad backend in Variables
// (its allocations' files go with the job). A backend without it leaves
// every execute run to a fresh session.
type SessionKeeper interface {
	// KeepSession copies the session archive the ended run taskID left
	// beside its result.json into the backend's keeping, where Cleanup
	// does not remove it. A run that left none is not an error.
	KeepSession(ctx context.Context, taskID string) (kept bool, err error)
	// KeptSession returns the archive kept for taskID, or ErrNotFound.
	KeptSession(ctx context.Context, taskID string) ([]byte, error)
}

// SessionNotKept is KeptSession's answer for a session the backend chose
// not to keep, with the reason the execute run's receipt gives.
type SessionNotKept struct{ Reason string }

func (e *SessionNotKept) Error() string { return e.Reason }

// Is makes a SessionNotKept an ErrNotFound too.
func (e *SessionNotKept) Is(target error) bool { return target == ErrNotFound }

// ErrBadSession: the run left a session archive the bot refuses to read (a
// link, not a regular file, over MaxSessionArchiveBytes).
var ErrBadSession = errors.New("session archive rejected")

// SessionFiles keeps session archives as <Dir>/<task-id>.tar.gz, for the
// backends that have a data directory; it is their SessionKeeper.
type SessionFiles struct {
	Dir string
	// OutputDir is where a run's result.json is on this host.
	OutputDir func(taskID string) string
	// MaxAge is how long an archive is kept (default 14 days): a plan
	// waits that long for /approve at most before its run starts fresh.
	MaxAge time.Duration
}

var _ SessionKeeper = (*SessionFiles)(nil)

// KeepSession implements SessionKeeper: it copies the run's
// SessionArchiveFile, read as untrusted output, to the store, and removes
// archives older than MaxAge.
func (s *SessionFiles) KeepSession(_ context.Context, taskID string) (bool, error) {
	if !ValidTaskID(taskID) {
		return false, fmt.Errorf("keep session: task id %q is not of the form T-XXXXXXXX", taskID)
	}
	b, err := ReadOutputFile(s.OutputDir(taskID), SessionArchiveFile, MaxSessionArchiveBytes, ErrBadSession)
	if errors.Is(err, ErrNoResult) || errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	s.prune()
	tmp, err := os.CreateTemp(s.Dir, ".tmp-"+taskID+"-*")
	if err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	if err := os.Rename(tmp.Name(), s.path(taskID)); err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	return true, nil
}

// KeptSession implements SessionKeeper.
func (s *SessionFiles) KeptSession(_ context.Context, taskID string) ([]byte, error) {
	if !ValidTaskID(taskID) {
		return nil, fmt.Errorf("session of %q: not a task id: %w", taskID, ErrNotFound)
	}
	b, err := ReadOutputFile(s.Dir, taskID+".tar.gz", MaxSessionArchiveBytes, ErrBadSession)
	if errors.Is(err, ErrNoResult) || errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("no session kept for %s: %w", taskID, ErrNotFound)
	}
	return b, err
}

func (s *SessionFiles) path(taskID string) string { return filepath.Join(s.Dir, taskID+".tar.gz") }

func (s *SessionFiles) prune() {
	maxAge := s.MaxAge
	if maxAge <= 0 {
		maxAge = 14 * 24 * time.Hour
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > maxAge {
			os.Remove(filepath.Join(s.Dir, e.Name()))
		}
	}
}
