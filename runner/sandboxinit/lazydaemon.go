package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The inner daemon on first use. A run without services needs no Docker
// daemon unless its agent uses Docker, and starting one costs a second or
// more of CPU on every run. So the init holds the daemon's socket itself
// (root's, like dockerd's own) and starts containerd and dockerd when the
// first connection arrives, handing dockerd that listening socket (systemd
// socket activation, `dockerd -H fd://`): the waiting connection, the
// agent's filter's first request, is served by dockerd once it is ready,
// with nothing in between. The egress defaults are in DOCKER-USER before
// the daemon starts, whenever that is.

// lazyDaemon is the socket held for a daemon not started yet.
type lazyDaemon struct {
	ln     *net.UnixListener
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	d      *daemon // once started
	err    error
}

// wantsDaemonNow reports whether the start needs the inner daemon before
// the runner: services (or Supabase) run on it.
func (dk *innerDocker) wantsDaemonNow() bool {
	return dk.order == nil || len(dk.order.Config.Services) > 0 || dk.order.Config.Supabase
}

// holdDockerSocket listens on the daemon's socket and starts the daemon on
// the first connection, in the background, for as long as ctx lasts.
func (dk *innerDocker) holdDockerSocket(ctx context.Context) error {
	_ = os.Remove(dockerSocket)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dockerSocket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("hold the inner daemon's socket %s: %w", dockerSocket, err)
	}
	// The socket is root's alone, as dockerd --group root makes it: the
	// agent reaches it only through the filter.
	if err := os.Chmod(dockerSocket, 0o660); err != nil {
		ln.Close()
		return err
	}
	// dockerd takes the socket over; closing the init's copy must not
	// remove its name.
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &lazyDaemon{ln: ln, cancel: cancel, done: make(chan struct{})}
	dk.lazy = l
	go func() {
		defer close(l.done)
		defer ln.Close()
		defer f.Close()
		if !waitReadable(ctx, f) {
			return
		}
		start := time.Now()
		d, err := dk.startDaemonOnFirstUse(ctx, f)
		l.mu.Lock()
		l.d, l.err = d, err
		l.mu.Unlock()
		if err != nil {
			// Closing the init's copy resets the waiting connections: the
			// filter answers them with the daemon's failure.
			dk.log.Error().Err(err).Msg("inner Docker daemon did not start on first use")
		} else {
			dk.log.Info().Dur("took", time.Since(start)).Msg("inner Docker daemon started on first use")
		}
		dk.timings.addStep("inner-dockerd", start, time.Since(start), err != nil, "on first use")
	}()
	dk.log.Info().Msg("no services: the inner Docker daemon starts on the first use of Docker")
	return nil
}

// waitReadable returns true once a connection waits on the listening
// socket f, false when ctx ends first. Go's listeners offer no wait without
// an accept, and an accepted connection could not be handed to dockerd.
func waitReadable(ctx context.Context, f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 250)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
		if n > 0 {
			return fds[0].Revents&unix.POLLIN != 0
		}
	}
	return false
}

// startDaemonOnFirstUse starts containerd and dockerd on the held socket.
func (dk *innerDocker) startDaemonOnFirstUse(ctx context.Context, f *os.File) (*daemon, error) {
	d, err := startContainerd(dk.log)
	if err != nil {
		return nil, err
	}
	choice := chooseStorage(dk.opts.storageDriver, dockerRoot, mountProber{})
	dk.log.Info().Str("driver", choice.Driver).Str("backing_fs", choice.Backing).Strs("why", choice.Reasons).Msg("storage driver chosen")
	cfg, err := dk.daemonConfig(ctx, choice.Driver)
	if err != nil {
		_ = d.stop()
		return nil, err
	}
	cfg.Listener = f
	if err := d.startDockerd(ctx, cfg); err != nil {
		_ = d.stop()
		return nil, err
	}
	return d, nil
}

// stop stops the inner daemon, whether it started before the runner or
// on first use.
func (dk *innerDocker) stop() {
	dk.stopLazy()
	if dk.daemon != nil {
		_ = dk.daemon.stop()
		dk.daemon = nil
	}
}

// stopLazy stops waiting for a first use and stops a daemon it started.
func (dk *innerDocker) stopLazy() {
	l := dk.lazy
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d != nil {
		_ = l.d.stop()
		l.d = nil
	}
	dk.lazy = nil
}
