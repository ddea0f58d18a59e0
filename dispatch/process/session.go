package process

import (
	"context"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

var _ dispatch.SessionKeeper = (*Backend)(nil)

// sessions keeps plan runs' session archives under <data-dir>/sessions.
func (b *Backend) sessions() dispatch.SessionFiles {
	return dispatch.SessionFiles{Dir: filepath.Join(b.o.DataDir, "sessions")}
}

// KeepSession implements dispatch.SessionKeeper.
func (b *Backend) KeepSession(_ context.Context, taskID string) (bool, error) {
	return b.sessions().Keep(b.OutputDir(taskID), taskID)
}

// KeptSession implements dispatch.SessionKeeper.
func (b *Backend) KeptSession(_ context.Context, taskID string) ([]byte, error) {
	return b.sessions().Get(taskID)
}
