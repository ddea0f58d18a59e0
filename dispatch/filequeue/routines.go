package filequeue

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Each repository's routine book is one file, routines/<repo>.json,
// replaced by rename under the flock of routines.lock: one lock for every
// repository, since a claim is a few small writes a minute at most.
var _ dispatch.RoutineBooks = (*Store)(nil)

func (s *Store) routineFile(repo string) string {
	return filepath.Join(s.dir, "routines", url.PathEscape(dispatch.RoutineBookKey(repo))+".json")
}

// UpdateRoutineBook implements dispatch.RoutineBooks: read, change and
// write back under the flock every replica on the machine takes.
func (s *Store) UpdateRoutineBook(ctx context.Context, repo string, change func([]byte) ([]byte, error)) error {
	if repo == "" {
		return errors.New("routine book: no repository named")
	}
	return s.underLock(ctx, "routines.lock", func() error {
		cur, err := s.ReadRoutineBook(ctx, repo)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return err
		}
		p := s.routineFile(repo)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("routine book of %s: %w", repo, err)
		}
		return writeAtomic(p, next)
	})
}

// ReadRoutineBook implements dispatch.RoutineBooks. Files are only ever
// replaced by rename, so reading needs no lock.
func (s *Store) ReadRoutineBook(_ context.Context, repo string) ([]byte, error) {
	b, err := os.ReadFile(s.routineFile(repo))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read routine book of %s: %w", repo, err)
	}
	return b, nil
}
