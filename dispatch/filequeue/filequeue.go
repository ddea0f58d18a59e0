// Package filequeue is the run queue of the backends that run on one
// machine (docker, process): one file in a directory that every bot
// replica on the machine shares, changed under an flock(2) lock and
// replaced by rename, so a reader never sees half a queue and a killed bot
// never leaves one. It is their dispatch.Queue.
package filequeue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Store keeps the queue in dir: queue (the entries, dispatch.EncodeQueue), queue.lock (the
// flock), and requests/<task-id>.json (what starting each run needs).
type Store struct {
	dir string
}

var _ dispatch.Queue = (*Store)(nil)

// New returns the queue kept in dir, created on first write.
func New(dir string) *Store { return &Store{dir: dir} }

func (s *Store) file() string { return filepath.Join(s.dir, "queue") }

// UpdateQueue implements dispatch.Queue. The flock serializes writers
// across processes; it is released when the file is closed, also when the
// process dies.
func (s *Store) UpdateQueue(ctx context.Context, change func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error)) error {
	return s.underLock(ctx, "queue.lock", func() error {
		cur, err := s.ReadQueue(ctx)
		if err != nil {
			return err
		}
		data, write, err := dispatch.ApplyQueueChange(cur, change)
		if !write {
			return err
		}
		return writeAtomic(s.file(), data)
	})
}

// underLock runs fn holding the flock of the file lockName in the
// directory, which serializes it with every replica's on the machine.
func (s *Store) underLock(ctx context.Context, lockName string, fn func() error) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("queue directory %s: %w", s.dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(s.dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s in %s: %w", lockName, s.dir, err)
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return fmt.Errorf("lock %s in %s: %w", lockName, s.dir, err)
	}
	return fn()
}

// flock takes an exclusive lock on f, giving up when ctx ends. It blocks in
// the kernel on its own goroutine; an abandoned attempt releases the lock
// as soon as it gets it, since the caller closes f.
func flock(ctx context.Context, f *os.File) error {
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReadQueue implements dispatch.Queue. The file is only ever replaced by
// rename, so reading needs no lock.
func (s *Store) ReadQueue(context.Context) ([]dispatch.QueueEntry, error) {
	data, err := os.ReadFile(s.file())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue: %w", err)
	}
	q, err := dispatch.DecodeQueue(data)
	if err != nil {
		return nil, fmt.Errorf("read queue %s: %w", s.file(), err)
	}
	return q, nil
}

// requestFile names a run's request; task ids are the bot's own
// (T-XXXXXXXX), but a path separator in one must not leave the directory.
func (s *Store) requestFile(taskID string) (string, error) {
	if taskID == "" || taskID != filepath.Base(taskID) || taskID[0] == '.' {
		return "", fmt.Errorf("queued run %q: not a task id", taskID)
	}
	return filepath.Join(s.dir, "requests", taskID+".json"), nil
}

// SaveQueued implements dispatch.Queue.
func (s *Store) SaveQueued(_ context.Context, taskID string, request []byte) error {
	p, err := s.requestFile(taskID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("save queued run %s: %w", taskID, err)
	}
	return writeAtomic(p, request)
}

// LoadQueued implements dispatch.Queue.
func (s *Store) LoadQueued(_ context.Context, taskID string) ([]byte, error) {
	p, err := s.requestFile(taskID)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("queued run %s: %w", taskID, dispatch.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load queued run %s: %w", taskID, err)
	}
	return data, nil
}

// DropQueued implements dispatch.Queue.
func (s *Store) DropQueued(_ context.Context, taskID string) error {
	p, err := s.requestFile(taskID)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("drop queued run %s: %w", taskID, err)
	}
	return nil
}

// writeAtomic writes data to a temporary file beside p and renames it over
// p.
func writeAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}
