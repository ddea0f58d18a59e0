package backendtest

import (
	"context"
	"slices"
	"sync"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// MemoryRoutineBooks are dispatch.RoutineBooks in memory; Memory embeds
// them. The zero value is ready to use.
type MemoryRoutineBooks struct {
	mu    sync.Mutex
	books map[string][]byte
}

var _ dispatch.RoutineBooks = (*MemoryRoutineBooks)(nil)

// UpdateRoutineBook implements dispatch.RoutineBooks: one mutex makes it
// atomic.
func (m *MemoryRoutineBooks) UpdateRoutineBook(_ context.Context, repo string, change func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := dispatch.RoutineBookKey(repo)
	next, err := change(slices.Clone(m.books[key]))
	if err != nil || next == nil {
		return err
	}
	if m.books == nil {
		m.books = map[string][]byte{}
	}
	m.books[key] = slices.Clone(next)
	return nil
}

// ReadRoutineBook implements dispatch.RoutineBooks.
func (m *MemoryRoutineBooks) ReadRoutineBook(_ context.Context, repo string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.books[dispatch.RoutineBookKey(repo)]), nil
}
