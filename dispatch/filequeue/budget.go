package filequeue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// The budget book lives beside the queue, under a lock of its own, so a
// reservation waits on no queue change: budget.json is replaced by rename
// while budget.lock is held.
var _ budget.Book = (*Store)(nil)

func (s *Store) budgetFile() string { return filepath.Join(s.dir, "budget.json") }

// UpdateBudget implements budget.Book: read, change and write back under
// the flock, which every replica on the machine takes.
func (s *Store) UpdateBudget(ctx context.Context, change func([]byte) ([]byte, error)) error {
	return s.underLock(ctx, "budget.lock", func() error {
		cur, err := s.ReadBudget(ctx)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return err
		}
		return writeAtomic(s.budgetFile(), next)
	})
}

// ReadBudget implements budget.Book. The file is only ever replaced by
// rename, so reading needs no lock.
func (s *Store) ReadBudget(context.Context) ([]byte, error) {
	b, err := os.ReadFile(s.budgetFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read budget book: %w", err)
	}
	return b, nil
}
