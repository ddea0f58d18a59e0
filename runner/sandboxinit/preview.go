package sandboxinit

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxPreviewConns bounds the connections forwarded at once: a page with
// its scripts, styles and a WebSocket or two needs a few dozen.
const maxPreviewConns = 256

// ServePreview offers the dev server to the bot as a Unix socket in
// dispatch.PreviewDir, when the run has a dev server and the backend gave
// the sandbox that directory. Each connection the bot makes is forwarded
// to the dev server's port on loopback, so the dev server sees a local
// client and nothing of who is watching; the bot strips what would tell
// it (app/preview.go). It stops with ctx.
func ServePreview(ctx context.Context, log zerolog.Logger, dir string, port int) {
	if port <= 0 {
		return
	}
	// The docker backend binds it from the task directory; elsewhere
	// (Nomad, reached through exec) the init makes it, root's.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Debug().Err(err).Str("dir", dir).Msg("no preview directory: the dev server is not offered to the bot")
		return
	}
	path := filepath.Join(dir, dispatch.PreviewSocket)
	_ = os.Remove(path) // a socket left by an earlier start of this container
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn().Err(err).Str("socket", path).Msg("cannot offer the dev server to the bot: no preview for this run")
		return
	}
	// The directory is the only gate (0700 on the host, under the bot's
	// task directory); the bot may run as another user than the init.
	_ = os.Chmod(path, 0o666)
	log.Info().Str("socket", path).Int("port", port).Msg("dev server offered to the bot for previews")
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	slots := make(chan struct{}, maxPreviewConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Warn().Err(err).Msg("preview socket: accept")
			}
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			forwardPreview(ctx, c, port)
		}()
	}
}

// forwardPreview joins one connection of the bot to the dev server. The
// dev server may listen on IPv4 or IPv6 loopback, so both are tried.
func forwardPreview(ctx context.Context, c net.Conn, port int) {
	defer c.Close()
	var d net.Dialer
	d.Timeout = 5 * time.Second
	var up net.Conn
	var err error
	for _, host := range []string{"127.0.0.1", "::1"} {
		if up, err = d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			break
		}
	}
	if err != nil {
		return // the bot answers 502: the dev server is not up (yet)
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

// screencastDir makes the runner's directory for its screencast socket in
// the preview directory: the runner's (0711), so the agent cannot put a
// socket of its own in its place; the bot reaches the socket by name.
func screencastDir(log zerolog.Logger, dir string, uid, gid int) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	p := filepath.Join(dir, dispatch.ScreencastDir)
	if err := os.Mkdir(p, 0o711); err != nil && !os.IsExist(err) {
		log.Warn().Err(err).Msg("no screencast directory: the agent's browser is not shown on the live page")
		return
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		log.Warn().Err(err).Msg("screencast directory: give it to the runner")
	}
}

// offerToTheBot offers the dev server (and, in a sandbox with a runner of
// its own, a place for the screencast) to the bot for the run's life; the
// returned function stops the offer.
func offerToTheBot(ctx context.Context, log zerolog.Logger, order *dispatch.WorkOrder, st started) (stop func()) {
	if order == nil {
		return func() {}
	}
	ctx, stop = context.WithCancel(ctx)
	go ServePreview(ctx, log, dispatch.PreviewDir, order.Config.Dev.Port)
	if st.runner != nil {
		screencastDir(log, dispatch.PreviewDir, st.runner.acct.UID, st.runner.acct.GID)
	}
	return stop
}
