package nomad

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// QueuePath is the Variable holding the run queue, and QueuedPrefix the
// one Variable per queued run with what starting it needs. The bot's ACL
// policy needs variables read, write and destroy on both.
const (
	QueuePath    = "sandbox-bot/queue"
	QueuedPrefix = "sandbox-bot/queued/"
)

// maxVarBytes is what Nomad lets one Variable hold (64 KiB). The queue is
// stored gzipped: a thousand entries compress to a fraction of it.
const maxVarBytes = 64 << 10

// varDocs are documents the replicas share in Variables of the bot's
// state namespace, written with check-and-set (updateVar) and packed with
// gzip (pack): the queue, the routine books, the budget book.
type varDocs struct {
	*cluster
	// gz reuses gzip writers: the queue is written on every submission.
	gz sync.Pool
}

// queueVars are the run queue (dispatch.Queue): its order in QueuePath,
// what starting each queued run needs under QueuedPrefix.
type queueVars struct {
	*varDocs
}

// UpdateQueue implements dispatch.Queue with check-and-set on the queue
// Variable's modify index: of two replicas changing the queue at once,
// Nomad takes one write, and the other reads again and retries.
func (b *queueVars) UpdateQueue(ctx context.Context, change func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error)) error {
	return b.updateVar(ctx, "queue", QueuePath, "entries", func(data []byte) ([]byte, error) {
		var cur []dispatch.QueueEntry
		if data != nil {
			var err error
			if cur, err = dispatch.DecodeQueue(data); err != nil {
				return nil, fmt.Errorf("read queue (variable %s): %w", QueuePath, err)
			}
		}
		next, write, err := dispatch.ApplyQueueChange(cur, change)
		if !write {
			return nil, err
		}
		return next, nil
	})
}

// updateVar replaces the packed document in item of the Variable at path
// by what change makes of it (nil: leave it), with check-and-set on the
// Variable's modify index: of two replicas writing at once, Nomad takes
// one write, and the other reads again and retries. what names the
// document in errors.
func (b *varDocs) updateVar(ctx context.Context, what, path, item string, change func([]byte) ([]byte, error)) error {
	for attempt := 0; ; attempt++ {
		cur, index, err := b.readVar(ctx, what, path, item)
		if err != nil {
			return err
		}
		data, err := change(cur)
		if err != nil || data == nil {
			return err
		}
		packed, err := b.pack(data)
		if err != nil {
			return fmt.Errorf("write %s (variable %s): %w", what, path, err)
		}
		// CAS index 0 creates the Variable only if it does not exist.
		v := &api.Variable{Namespace: b.o.StateNamespace, Path: path, Items: api.VariableItems{item: packed}, ModifyIndex: index}
		_, _, err = b.c.Variables().CheckedUpdate(v, b.stateW(ctx))
		var cas api.ErrCASConflict
		if !errors.As(err, &cas) {
			if err != nil {
				return fmt.Errorf("write %s (variable %s): %w", what, path, err)
			}
			return nil
		}
		// Another replica wrote first. A short random pause keeps two
		// replicas from colliding in step.
		pause := time.NewTimer(time.Duration(rand.IntN(5*min(attempt+1, 10))+1) * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("write %s (variable %s): %w after %d conflicting writes", what, path, ctx.Err(), attempt+1)
		case <-pause.C:
		}
	}
}

// ReadQueue implements dispatch.Queue.
func (b *queueVars) ReadQueue(ctx context.Context) ([]dispatch.QueueEntry, error) {
	data, _, err := b.readVar(ctx, "queue", QueuePath, "entries")
	if err != nil || data == nil {
		return nil, err
	}
	q, err := dispatch.DecodeQueue(data)
	if err != nil {
		return nil, fmt.Errorf("read queue (variable %s): %w", QueuePath, err)
	}
	return q, nil
}

// readVar returns the unpacked document in item of the Variable at path
// and the modify index to write it back under (nil and 0: the Variable
// does not exist).
func (b *varDocs) readVar(ctx context.Context, what, path, item string) ([]byte, uint64, error) {
	v, _, err := b.c.Variables().Peek(path, b.stateQ(ctx))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s (variable %s): %w", what, path, err)
	}
	if v == nil {
		return nil, 0, nil
	}
	data, err := unpack(v.Items[item])
	if err != nil {
		return nil, 0, fmt.Errorf("read %s (variable %s): %w", what, path, err)
	}
	return data, v.ModifyIndex, nil
}

// SaveQueued implements dispatch.Queue.
func (b *queueVars) SaveQueued(ctx context.Context, taskID string, request []byte) error {
	packed, err := b.pack(request)
	if err != nil {
		return fmt.Errorf("save queued run %s: %w", taskID, err)
	}
	v := &api.Variable{Namespace: b.o.StateNamespace, Path: queuedPath(taskID), Items: api.VariableItems{"request": packed}}
	if _, _, err := b.c.Variables().Update(v, b.stateW(ctx)); err != nil {
		return fmt.Errorf("save queued run %s (variable %s): %w", taskID, v.Path, err)
	}
	return nil
}

// LoadQueued implements dispatch.Queue.
func (b *queueVars) LoadQueued(ctx context.Context, taskID string) ([]byte, error) {
	path := queuedPath(taskID)
	v, _, err := b.c.Variables().Peek(path, b.stateQ(ctx))
	if err != nil {
		return nil, fmt.Errorf("load queued run %s (variable %s): %w", taskID, path, err)
	}
	if v == nil {
		return nil, fmt.Errorf("queued run %s: %w", taskID, dispatch.ErrNotFound)
	}
	raw, err := unpack(v.Items["request"])
	if err != nil {
		return nil, fmt.Errorf("load queued run %s (variable %s): %w", taskID, path, err)
	}
	return raw, nil
}

// DropQueued implements dispatch.Queue.
func (b *queueVars) DropQueued(ctx context.Context, taskID string) error {
	path := queuedPath(taskID)
	if _, err := b.c.Variables().Delete(path, b.stateW(ctx)); err != nil {
		return fmt.Errorf("drop queued run %s (variable %s): %w", taskID, path, err)
	}
	return nil
}

// queuedPath is a queued run's Variable; task ids are the bot's own, but
// any byte Nomad paths refuse is escaped like a lock key.
func queuedPath(taskID string) string {
	return QueuedPrefix + LockPath(taskID)[len(LockPrefix):]
}

// pack encodes data as base64 of its gzip, refusing what would not fit in
// a Variable. The fastest level, and writers reused: the queue is written
// on every submission, and a new gzip writer allocates more than the
// queue weighs.
func (b *varDocs) pack(data []byte) (string, error) {
	var buf bytes.Buffer
	zw, _ := b.gz.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(&buf, gzip.BestSpeed); err != nil {
			return "", err
		}
	} else {
		zw.Reset(&buf)
	}
	defer b.gz.Put(zw)
	if _, err := zw.Write(data); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	s := base64.StdEncoding.EncodeToString(buf.Bytes())
	if len(s) > maxVarBytes-1024 {
		return "", fmt.Errorf("%d bytes packed, more than a Nomad Variable holds (%d)", len(s), maxVarBytes)
	}
	return s, nil
}

// unpack reverses pack, reading at most 16 MiB of what it inflates to.
func unpack(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 16<<20))
}
