package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// MemoryQueue is an in-memory dispatch.Queue; Memory embeds one. The
// zero value is ready to use.
type MemoryQueue struct {
	mu       sync.Mutex
	entries  []dispatch.QueueEntry
	requests map[string][]byte
}

var _ dispatch.Queue = (*MemoryQueue)(nil)

// UpdateQueue implements dispatch.Queue: one mutex makes it atomic.
func (q *MemoryQueue) UpdateQueue(_ context.Context, change func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error)) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	next, err := change(slices.Clone(q.entries))
	if errors.Is(err, dispatch.ErrQueueUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	q.entries = slices.Clone(next)
	return nil
}

// ReadQueue implements dispatch.Queue.
func (q *MemoryQueue) ReadQueue(context.Context) ([]dispatch.QueueEntry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.entries), nil
}

// SaveQueued implements dispatch.Queue.
func (q *MemoryQueue) SaveQueued(_ context.Context, taskID string, request []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.requests == nil {
		q.requests = map[string][]byte{}
	}
	q.requests[taskID] = slices.Clone(request)
	return nil
}

// LoadQueued implements dispatch.Queue.
func (q *MemoryQueue) LoadQueued(_ context.Context, taskID string) ([]byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.requests[taskID]
	if !ok {
		return nil, dispatch.ErrNotFound
	}
	return slices.Clone(r), nil
}

// DropQueued implements dispatch.Queue.
func (q *MemoryQueue) DropQueued(_ context.Context, taskID string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.requests, taskID)
	return nil
}
