package backendtest

import (
	"context"
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

var _ dispatch.SessionKeeper = (*Memory)(nil)

// LeaveSession plays a run that left archive beside its result.json (a
// plan run's agent session, dispatch.SessionArchiveFile).
func (b *Memory) LeaveSession(taskID string, archive []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == nil {
		b.left, b.kept = map[string][]byte{}, map[string][]byte{}
	}
	b.left[taskID] = append([]byte(nil), archive...)
}

// KeepSession implements dispatch.SessionKeeper.
func (b *Memory) KeepSession(_ context.Context, taskID string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.left[taskID]
	if !ok {
		return false, nil
	}
	b.kept[taskID] = a
	return true, nil
}

// KeptSession implements dispatch.SessionKeeper.
func (b *Memory) KeptSession(_ context.Context, taskID string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.kept[taskID]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no session kept for %s: %w", taskID, dispatch.ErrNotFound)
}
