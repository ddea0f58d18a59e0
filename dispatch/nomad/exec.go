package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// runnerPath is the runner's binary in the sandbox image.
const runnerPath = "/usr/local/bin/sandbox-runner"

// execSessions connect to sockets inside a live run's allocation through
// Nomad's exec API (dispatch.PreviewDialer, dispatch.ScreencastDialer).
type execSessions struct {
	*shared
	// allocs caches each run's running allocation (allocTTL).
	allocs allocCache
}

// DialPreview implements dispatch.PreviewDialer on Nomad: the bot cannot
// reach the allocation's directories, so each connection is an exec
// session of the allocation's task (Nomad's allocation exec API) running
// `sandbox-runner pipe` to the socket the sandbox's init offers; nothing
// in the sandbox listens on the node's network.
func (b *execSessions) DialPreview(ctx context.Context, taskID string) (net.Conn, error) {
	return b.dialSocket(ctx, taskID, path.Join(dispatch.PreviewDir, dispatch.PreviewSocket))
}

// DialScreencast implements dispatch.ScreencastDialer the same way.
func (b *execSessions) DialScreencast(ctx context.Context, taskID string) (net.Conn, error) {
	return b.dialSocket(ctx, taskID, path.Join(dispatch.PreviewDir, dispatch.ScreencastDir, dispatch.ScreencastSocket))
}

// allocTTL is how long a run's running allocation is taken as known:
// every connection of a preview would otherwise cost a job lookup and two
// reads of Nomad's API before its exec session.
const allocTTL = 2 * time.Second

// allocCache keeps each run's running allocation for allocTTL.
type allocCache struct {
	mu sync.Mutex
	m  map[string]cachedAlloc
}

type cachedAlloc struct {
	id, node string
	at       time.Time
}

// runningAlloc is the run's running allocation, from the cache when it is
// fresh.
func (b *execSessions) runningAlloc(ctx context.Context, taskID string) (*api.Allocation, error) {
	c := &b.allocs
	c.mu.Lock()
	e, ok := c.m[taskID]
	c.mu.Unlock()
	if ok && time.Since(e.at) < allocTTL {
		return &api.Allocation{ID: e.id, NodeID: e.node, Namespace: b.o.Namespace}, nil
	}
	jobID, err := b.findJob(ctx, taskID)
	if err != nil {
		return nil, err
	}
	v, err := b.fetchView(ctx, jobID)
	if err != nil {
		return nil, err
	}
	a := v.latest()
	if a == nil || a.ClientStatus != api.AllocClientStatusRunning {
		return nil, fmt.Errorf("nomad backend: %s: no running allocation (%w)", taskID, dispatch.ErrNoPreview)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 4096 {
		c.m = map[string]cachedAlloc{}
	}
	c.m[taskID] = cachedAlloc{id: a.ID, node: a.NodeID, at: time.Now()}
	c.mu.Unlock()
	return &api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace}, nil
}

func (b *execSessions) dialSocket(ctx context.Context, taskID, socket string) (net.Conn, error) {
	alloc, err := b.runningAlloc(ctx, taskID)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	// The session lives as long as the connection, not the dial.
	sctx, cancel := context.WithCancel(context.Background())
	go func() {
		var stderr headBuffer
		code, err := b.c.Allocations().Exec(sctx, alloc, TaskName, false, []string{runnerPath, "pipe", socket}, inR, outW, &stderr, nil, b.qopts(sctx))
		if err == nil && code != 0 {
			err = fmt.Errorf("nomad backend: %s: sandbox-runner pipe %s exited with %d: %s (%w)", taskID, socket, code, stderr.String(), dispatch.ErrNoPreview)
		}
		outW.CloseWithError(err)
		inR.CloseWithError(errors.Join(err, io.ErrClosedPipe))
	}()
	return &execConn{r: outR, w: inW, cancel: cancel}, nil
}

// execConn is an exec session's stdin and stdout as a net.Conn. Deadlines
// are not kept: the HTTP transport and the proxy above it bound their own
// waits.
type execConn struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	cancel context.CancelFunc
	once   sync.Once
}

func (c *execConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// CloseWrite ends the session's stdin (the proxy's half-close).
func (c *execConn) CloseWrite() error { return c.w.Close() }

func (c *execConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		c.r.Close()
		c.cancel()
	})
	return nil
}

func (c *execConn) LocalAddr() net.Addr              { return execAddr{} }
func (c *execConn) RemoteAddr() net.Addr             { return execAddr{} }
func (c *execConn) SetDeadline(time.Time) error      { return nil }
func (c *execConn) SetReadDeadline(time.Time) error  { return nil }
func (c *execConn) SetWriteDeadline(time.Time) error { return nil }

type execAddr struct{}

func (execAddr) Network() string { return "nomad-exec" }
func (execAddr) String() string  { return "nomad-exec" }

// headBuffer keeps the first 512 bytes of what the pipe said on stderr,
// for the error (the sandbox can make it say anything: it is only logged,
// quoted).
type headBuffer struct{ b []byte }

func (t *headBuffer) Write(p []byte) (int, error) {
	if room := 512 - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string { return strconv.Quote(strings.TrimSpace(string(t.b))) }
