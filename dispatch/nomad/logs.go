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

// logFollower reads the sandbox task's stdout from the start and hands every
// progress line to the callback, resuming at the byte it got to if the
// stream breaks while the task runs.
type logFollower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *Backend) followLogs(ctx context.Context, meta dispatch.Meta, jobID string, a *allocView, progress func(dispatch.Progress)) *logFollower {
	lctx, cancel := context.WithCancel(ctx)
	f := &logFollower{cancel: cancel, done: make(chan struct{})}
	log := b.runLogger(meta, jobID).With().Str("alloc_id", a.ID).Logger()
	go func() {
		defer close(f.done)
		b.readLogs(lctx, &api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace}, progress, log)
	}()
	return f
}

// drain gives the follower up to d to reach the end of the log of an
// ended task, then stops it.
func (f *logFollower) drain(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
	}
	f.stop()
}

func (f *logFollower) stop() {
	f.cancel()
	<-f.done
}

func (b *Backend) readLogs(ctx context.Context, alloc *api.Allocation, progress func(dispatch.Progress), log zerolog.Logger) {
	var received int64
	var partial []byte
	emit := func(data []byte) {
		partial = append(partial, data...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			if p, ok := dispatch.ParseProgress(bytes.TrimRight(partial[:i], "\r")); ok {
				progress(p)
			}
			partial = partial[i+1:]
		}
		if len(partial) > maxLine {
			partial = nil
		}
		if len(partial) == 0 {
			partial = nil // let the backing array go between lines
		}
	}
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		frames, errc := b.c.AllocFS().Logs(alloc, true, TaskName, api.FSLogNameStdout, api.OriginStart, received, nil, b.qopts(ctx))
		err := consumeFrames(frames, errc, func(fr *api.StreamFrame) {
			received += int64(len(fr.Data))
			emit(fr.Data)
		})
		if err == nil {
			// The client closed the stream: the task is dead and every
			// byte was sent.
			if p, ok := dispatch.ParseProgress(bytes.TrimSpace(partial)); ok {
				progress(p)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if isNotFound(err) || strings.Contains(err.Error(), "Unknown allocation") {
			log.Warn().Err(err).Msg("the allocation's logs are gone; no more progress")
			return
		}
		log.Debug().Err(err).Int64("offset", received).Msg("log stream broke; resuming")
		sleep(ctx, backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

// consumeFrames reads until the frame channel closes (nil: end of log) or an
// error arrives. It always drains, because the api client's reader blocks
// on a full channel and would leak otherwise.
func consumeFrames(frames <-chan *api.StreamFrame, errc <-chan error, fn func(*api.StreamFrame)) error {
	if frames == nil {
		return <-errc
	}
	for {
		select {
		case fr, ok := <-frames:
			if !ok {
				select {
				case err := <-errc:
					return err
				default:
					return nil
				}
			}
			if len(fr.Data) > 0 {
				fn(fr)
			}
		case err := <-errc:
			return err
		}
	}
}
