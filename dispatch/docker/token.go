package docker

import (
	"context"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

var _ dispatch.TokenReader = (*Backend)(nil)

// CurrentToken implements dispatch.TokenReader from the task directory.
func (b *Backend) CurrentToken(_ context.Context, taskID string) (string, error) {
	return dispatch.ReadTokenFile(b.TaskDir(taskID), filepath.Join("secrets", "token"), taskID)
}
