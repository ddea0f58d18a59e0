package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// previewDir is the task directory's part the sandbox's init offers the
// dev server in (dispatch.PreviewDir inside).
const previewDir = "preview"

// sourceFile is a preview's code in the task directory.
const sourceFile = "source.tar.gz"

// writePreviewDir makes the directory the init puts its socket in. In a
// coding sandbox the init is root and the agent must not write there, so
// it stays root's; in task mode the init runs as the sandbox user, which
// then owns it (it is also the only user in such a sandbox).
func (b *taskFiles) writePreviewDir(dir string, task, asRoot bool) error {
	p := filepath.Join(dir, previewDir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	switch {
	case task && asRoot:
		return os.Chown(p, b.o.SandboxUID, b.o.SandboxGID)
	case task && os.Geteuid() != b.o.SandboxUID:
		return os.Chmod(p, 0o777) // inside the 0700 task directory
	}
	return nil
}

// sockets reach a live run's sandbox through the sockets its init makes
// in the task directory: the dev server and the screencast.
type sockets struct {
	*engine
}

// DialPreview implements dispatch.PreviewDialer: a connection to the run's
// dev server, through the socket the sandbox's init offers in the task
// directory.
func (b *sockets) DialPreview(ctx context.Context, taskID string) (net.Conn, error) {
	return b.dialTaskSocket(ctx, taskID, previewDir+"/"+dispatch.PreviewSocket)
}

// DialScreencast implements dispatch.ScreencastDialer: the runner's stream
// of the agent's browser.
func (b *sockets) DialScreencast(ctx context.Context, taskID string) (net.Conn, error) {
	return b.dialTaskSocket(ctx, taskID, previewDir+"/"+dispatch.ScreencastDir+"/"+dispatch.ScreencastSocket)
}

// dialTaskSocket connects to a socket the sandbox made in its task
// directory, without following any link (dispatch.DialSocketBeneath): a
// link planted there cannot turn the bot's connection toward a socket of
// the host (its Docker daemon, say).
func (b *sockets) dialTaskSocket(ctx context.Context, taskID, rel string) (net.Conn, error) {
	if !dispatch.ValidTaskID(taskID) {
		return nil, dispatch.ErrNotFound
	}
	c, err := dispatch.DialSocketBeneath(ctx, b.TaskDir(taskID), rel)
	if errors.Is(err, unix.ENOENT) && !errors.Is(err, dispatch.ErrNoPreview) {
		return nil, dispatch.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, err)
	}
	return c, nil
}
