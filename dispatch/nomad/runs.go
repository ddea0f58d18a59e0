package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// runWatch answers what a run is doing and what it left: Status and List
// by query, Wait on the watcher's shared event stream (watch.go), Result
// from the ended allocation's files.
type runWatch struct {
	*shared
}

// Status implements dispatch.Backend.
func (b *runWatch) Status(ctx context.Context, taskID string) (dispatch.RunStatus, error) {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return dispatch.RunStatus{}, err
	}
	v, err := b.fetchView(ctx, id)
	if err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("status of %s: %w", taskID, err)
	}
	return b.classify(ctx, v), nil
}

// List implements dispatch.Backend: every job with the bot's prefix and
// task meta, for reconciliation after a restart.
func (b *runWatch) List(ctx context.Context) ([]dispatch.RunStatus, error) {
	stubs, _, err := b.c.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}},
		withPrefix(b.qopts(ctx), b.o.JobPrefix))
	if err != nil {
		return nil, fmt.Errorf("list sandbox jobs at %s: %w", b.c.Address(), err)
	}
	var out []dispatch.RunStatus
	for _, s := range stubs {
		if s.Meta[MetaTaskID] == "" {
			continue // not one of ours, despite the prefix
		}
		v, err := b.fetchView(ctx, s.ID)
		if errors.Is(err, dispatch.ErrNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			return nil, err
		}
		b.w.remember(s.Meta[MetaTaskID], s.ID)
		out = append(out, b.classify(ctx, v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.TaskID < out[j].Meta.TaskID })
	return out, nil
}

// classify turns a view into a RunStatus. The one decision that needs more
// than Nomad's state: a task killed from outside (stopped, OOM, evicted)
// that left no receipt counts as lost, so the bot resumes it in continue
// mode; one that wrote its interrupted receipt is complete.
func (b *runWatch) classify(ctx context.Context, v *runView) dispatch.RunStatus {
	st := v.status()
	if st.State == dispatch.StateComplete && v.killed() {
		if _, err := b.readResult(ctx, v); errors.Is(err, dispatch.ErrNoResult) {
			st.State = dispatch.StateLost
		}
	}
	return st
}

// Result implements dispatch.Backend.
func (b *runWatch) Result(ctx context.Context, taskID string) (*dispatch.Result, error) {
	v, err := b.endedView(ctx, "result", taskID)
	if err != nil {
		return nil, err
	}
	raw, err := b.readResult(ctx, v)
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w", taskID, err)
	}
	r, err := dispatch.ParseResult(raw)
	if err != nil {
		return nil, fmt.Errorf("result of %s (allocation %s): %w", taskID, v.latest().ID, err)
	}
	return r, nil
}

// readResult cats alloc/data/result.json of the run's latest allocation.
// The watcher keeps what it read so the node is asked once.
func (b *runWatch) readResult(ctx context.Context, v *runView) ([]byte, error) {
	a := v.latest()
	if a == nil {
		return nil, fmt.Errorf("job %s never got an allocation: %w", v.jobID, dispatch.ErrNoResult)
	}
	if raw, ok := b.w.cachedResult(a.ID); ok {
		return raw, nil
	}
	rc, err := b.c.AllocFS().Cat(&api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace}, ResultPath, b.qopts(ctx))
	if err != nil {
		if isNotFound(err) || strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "Unknown allocation") {
			return nil, fmt.Errorf("allocation %s has no %s: %w", a.ID, ResultPath, dispatch.ErrNoResult)
		}
		return nil, fmt.Errorf("read %s of allocation %s: %w", ResultPath, a.ID, err)
	}
	defer rc.Close()
	// The sandbox wrote this file: the cap stops reading a link to
	// /dev/zero or a huge file after MaxResultBytes, whatever the node
	// serves.
	raw, err := io.ReadAll(io.LimitReader(rc, dispatch.MaxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s of allocation %s: %w", ResultPath, a.ID, err)
	}
	if len(raw) > dispatch.MaxResultBytes {
		return nil, fmt.Errorf("%s of allocation %s is over the %d-byte cap: %w", ResultPath, a.ID, dispatch.MaxResultBytes, dispatch.ErrBadResult)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("allocation %s has an empty %s: %w", a.ID, ResultPath, dispatch.ErrNoResult)
	}
	if isTerminalClient(a.ClientStatus) {
		b.w.storeResult(a.ID, raw)
	}
	return raw, nil
}
