package sandboxinit

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// previewRoot is dispatch.PreviewDir, cleaned.
var previewRoot = filepath.Clean(dispatch.PreviewDir)

// Pipe joins stdin and stdout to one of the sockets the sandbox offers the
// bot (`sandbox-runner pipe SOCKET`): how the bot reaches them through an
// exec API (Nomad's allocation exec) where it cannot reach the task
// directory. Only the sockets under dispatch.PreviewDir are reachable, so
// an exec session cannot be turned into a path to another socket.
func Pipe(ctx context.Context, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-runner pipe SOCKET (a socket under "+previewRoot+")")
		return exitUsage
	}
	path := filepath.Clean(args[0])
	if !strings.HasPrefix(path, previewRoot+"/") {
		fmt.Fprintf(os.Stderr, "sandbox-runner pipe: %s is not under %s\n", path, previewRoot)
		return exitUsage
	}
	// Beneath the preview directory without following a link: the
	// screencast's directory is the runner's, not root's.
	c, err := dispatch.DialSocketBeneath(ctx, previewRoot, strings.TrimPrefix(path, previewRoot+"/"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-runner pipe: %v\n", err)
		return 1
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(os.Stdout, c)
		close(done)
	}()
	_, _ = io.Copy(c, os.Stdin)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
	return 0
}
