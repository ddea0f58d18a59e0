package backendtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// memSessions are the session archives runs left (LeaveSession, RunScript)
// and the bot kept (dispatch.SessionKeeper), under a mutex of their own:
// no run shares their state.
type memSessions struct {
	mu         sync.Mutex
	left, kept map[string][]byte
}

// LeaveSession plays a run that left archive beside its result.json (a
// plan run's agent session, dispatch.SessionArchiveFile).
func (b *memSessions) LeaveSession(taskID string, archive []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == nil {
		b.left, b.kept = map[string][]byte{}, map[string][]byte{}
	}
	b.left[taskID] = append([]byte(nil), archive...)
}

// KeepSession implements dispatch.SessionKeeper.
func (b *memSessions) KeepSession(_ context.Context, taskID string) (bool, error) {
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
func (b *memSessions) KeptSession(_ context.Context, taskID string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.kept[taskID]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no session kept for %s: %w", taskID, dispatch.ErrNotFound)
}
