package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A started run is its task directory (process.go): the meta file, the
// exit file the reaper writes, the runner's log and out/. The backend's
// view of a run is read from them, so a restarted bot finds its runs.

// runWatch reads runs from their task directories: what a run is doing
// and what it left (dispatch.Backend's Status, List, Wait and Result,
// dispatch.ArtifactReader).
type runWatch struct {
	*tasks
}

// Status implements dispatch.Backend.
func (b *runWatch) Status(_ context.Context, taskID string) (dispatch.RunStatus, error) {
	return b.status(taskID)
}

func (b *tasks) status(taskID string) (dispatch.RunStatus, error) {
	dir := b.TaskDir(taskID)
	mb, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr == nil {
			// Submit is between mkdir and writing meta.json.
			return dispatch.RunStatus{Meta: dispatch.Meta{TaskID: taskID}, State: dispatch.StatePending}, nil
		}
		return dispatch.RunStatus{}, fmt.Errorf("process backend: %s: %w", taskID, dispatch.ErrNotFound)
	}
	if err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("process backend: read meta of %s: %w", taskID, err)
	}
	var m meta
	if err := json.Unmarshal(mb, &m); err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("process backend: meta of %s: %w", taskID, err)
	}
	st := dispatch.RunStatus{Meta: m.Meta, StartedAt: m.StartedAt}
	if eb, err := os.ReadFile(filepath.Join(dir, exitFile)); err == nil {
		var ex exitInfo
		if err := json.Unmarshal(eb, &ex); err != nil {
			return dispatch.RunStatus{}, fmt.Errorf("process backend: exit record of %s: %w", taskID, err)
		}
		st.State, st.ExitCode, st.EndedAt = dispatch.StateComplete, ex.ExitCode, ex.EndedAt
		return st, nil
	}
	if b.ours(taskID) || alive(m.PID, m.StartTicks) {
		st.State = dispatch.StateRunning
		return st, nil
	}
	// Not ours (a previous bot process started it) and gone without an
	// exit record: its parent died with it or before reaping it.
	st.State = dispatch.StateLost
	return st, nil
}

func (b *tasks) ours(taskID string) bool {
	b.mu.Lock()
	c, ok := b.procs[taskID]
	b.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// List implements dispatch.Backend.
func (b *runWatch) List(_ context.Context) ([]dispatch.RunStatus, error) {
	ents, err := os.ReadDir(filepath.Join(b.o.DataDir, "tasks"))
	if err != nil {
		return nil, fmt.Errorf("process backend: list tasks: %w", err)
	}
	var out []dispatch.RunStatus
	for _, e := range ents {
		if !e.IsDir() || !dispatch.ValidTaskID(e.Name()) {
			continue
		}
		st, err := b.status(e.Name())
		if err != nil {
			b.log.Warn().Err(err).Str("task_id", e.Name()).Msg("skipping an unreadable task directory")
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out, nil
}

// Wait implements dispatch.Backend: it follows runner.log, passing each
// progress line to progress, until the run has ended and the log is read
// to its end.
func (b *runWatch) Wait(ctx context.Context, taskID string, progress func(dispatch.Progress)) (dispatch.RunStatus, error) {
	if _, err := b.status(taskID); err != nil {
		return dispatch.RunStatus{}, err
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var rd *bufio.Reader
	var partial []byte
	readAll := func() {
		if f == nil {
			var err error
			if f, err = os.Open(b.LogPath(taskID)); err != nil {
				return
			}
			rd = bufio.NewReaderSize(f, 64*1024)
		}
		for {
			chunk, err := rd.ReadBytes('\n')
			partial = append(partial, chunk...)
			if err != nil {
				return // EOF: keep the partial line for the next read
			}
			if p, ok := dispatch.ParseProgress(bytesTrim(partial)); ok && progress != nil {
				progress(p)
			}
			partial = partial[:0]
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		readAll()
		st, err := b.status(taskID)
		if err != nil {
			return st, err
		}
		if st.State.Ended() {
			readAll()
			return st, nil
		}
		b.mu.Lock()
		c := b.procs[taskID]
		b.mu.Unlock()
		var done <-chan struct{}
		if c != nil {
			done = c.done
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-done:
		case <-tick.C:
		}
	}
}

// Result implements dispatch.Backend.
func (b *runWatch) Result(_ context.Context, taskID string) (*dispatch.Result, error) {
	st, err := b.status(taskID)
	if err != nil {
		return nil, err
	}
	if !st.State.Ended() {
		return nil, fmt.Errorf("process backend: %s is %s: %w", taskID, st.State, dispatch.ErrRunning)
	}
	r, err := dispatch.ReadResultFile(b.TaskDir(taskID), outDir+"/"+dispatch.ResultFile)
	if err != nil {
		return nil, fmt.Errorf("process backend: %s: %w", taskID, err)
	}
	return r, nil
}

func (b *tasks) ended(taskID string) bool {
	_, err := os.Stat(filepath.Join(b.TaskDir(taskID), exitFile))
	return err == nil
}

func (b *tasks) readMeta(taskID string) (meta, error) {
	var m meta
	mb, err := os.ReadFile(filepath.Join(b.TaskDir(taskID), metaFile))
	if err != nil {
		return m, fmt.Errorf("process backend: read meta of %s: %w", taskID, err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return m, fmt.Errorf("process backend: meta of %s: %w", taskID, err)
	}
	return m, nil
}
