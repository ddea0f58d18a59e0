package nomad

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxLine bounds a partial log line kept between frames; a longer line is
// a tool's output, not a progress event.
const maxLine = 1 << 20

// logStream follows the sandbox task's stdout from the start and turns
// progress lines into callbacks. It is driven from Wait's own loop rather
// than a goroutine of its own: a thousand watched runs are a thousand
// streams, and every goroutine per run counts.
type logStream struct {
	cl       *cluster
	alloc    *api.Allocation
	progress func(dispatch.Progress)
	log      zerolog.Logger

	frames <-chan *api.StreamFrame // nil while not connected
	errc   <-chan error
	cancel context.CancelFunc

	received int64 // bytes consumed, where a reconnect resumes
	partial  []byte
	backoff  time.Duration
	retry    *time.Timer // set while waiting to reconnect
	done     bool        // the log ended with the task, or it is gone
}

func (b *runWatch) newLogStream(meta dispatch.Meta, jobID string, a *allocView, progress func(dispatch.Progress)) *logStream {
	return &logStream{
		cl:       b.cluster,
		alloc:    &api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace},
		progress: progress,
		log:      b.runLogger(meta, jobID).With().Str("alloc_id", a.ID).Logger(),
		backoff:  200 * time.Millisecond,
	}
}

func (l *logStream) open(ctx context.Context) {
	lctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	l.frames, l.errc = l.cl.c.AllocFS().Logs(l.alloc, true, TaskName, api.FSLogNameStdout, api.OriginStart, l.received, nil, l.cl.qopts(lctx))
	if l.frames == nil {
		// The request itself failed; the error is waiting on errc.
		l.frames = closedFrames
	}
}

var closedFrames = func() <-chan *api.StreamFrame {
	c := make(chan *api.StreamFrame)
	close(c)
	return c
}()

// channels returns what Wait selects on; nil channels block forever.
func (l *logStream) channels() (<-chan *api.StreamFrame, <-chan error, <-chan time.Time) {
	if l == nil || l.done {
		return nil, nil, nil
	}
	var retry <-chan time.Time
	if l.retry != nil {
		retry = l.retry.C
	}
	return l.frames, l.errc, retry
}

func (l *logStream) onFrame(fr *api.StreamFrame, ok bool) {
	if !ok {
		// The client closed the stream: the task is dead and every byte
		// was sent. An error may still be queued behind the close.
		select {
		case err := <-l.errc:
			l.onError(err)
			return
		default:
		}
		if p, ok := dispatch.ParseProgress(bytes.TrimSpace(l.partial)); ok {
			l.progress(p)
		}
		l.stopStream(false)
		l.done = true
		return
	}
	if len(fr.Data) == 0 {
		return
	}
	l.received += int64(len(fr.Data))
	l.partial = append(l.partial, fr.Data...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if p, ok := dispatch.ParseProgress(bytes.TrimRight(l.partial[:i], "\r")); ok {
			l.progress(p)
		}
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > maxLine || len(l.partial) == 0 {
		l.partial = nil // let the backing array go between lines
	}
}

func (l *logStream) onError(err error) {
	// The reader sent its error and returned: nothing to drain.
	l.stopStream(false)
	if isNotFound(err) || strings.Contains(err.Error(), "Unknown allocation") {
		l.log.Warn().Err(err).Msg("the allocation's logs are gone; no more progress")
		l.done = true
		return
	}
	l.log.Debug().Err(err).Int64("offset", l.received).Dur("retry_in", l.backoff).Msg("log stream broke; resuming")
	l.retry = time.NewTimer(l.backoff)
	l.backoff = min(l.backoff*2, 5*time.Second)
}

func (l *logStream) onRetry(ctx context.Context) {
	l.retry = nil
	l.open(ctx)
}

// stopStream cancels the request and, while the api client's reader may
// still run, drains it: it blocks on a full channel and would leak.
func (l *logStream) stopStream(drain bool) {
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
	if drain && l.frames != nil && l.frames != closedFrames {
		for {
			select {
			case _, ok := <-l.frames:
				if ok {
					continue
				}
			case <-l.errc:
			}
			break
		}
	}
	l.frames, l.errc = nil, nil
}

func (l *logStream) close() {
	if l == nil {
		return
	}
	if l.retry != nil {
		l.retry.Stop()
		l.retry = nil
	}
	l.stopStream(true)
	l.done = true
}
