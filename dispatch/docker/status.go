package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// watcher follows runs and reads what they left: their state from the
// engine (remembering the ended ones in engine.ended), their log (Wait),
// their receipt and artifacts from the task directory.
type watcher struct {
	*engine
}

// inspected is the part of `docker container inspect` the backend reads.
type inspected struct {
	Name  string `json:"Name"`
	State struct {
		Status     string    `json:"Status"`
		ExitCode   int       `json:"ExitCode"`
		OOMKilled  bool      `json:"OOMKilled"`
		StartedAt  time.Time `json:"StartedAt"`
		FinishedAt time.Time `json:"FinishedAt"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func (b *watcher) inspect(ctx context.Context, names ...string) ([]inspected, error) {
	out, err := b.cli.run(ctx, append([]string{"container", "inspect"}, names...)...)
	if err != nil {
		return nil, err
	}
	var got []inspected
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		return nil, fmt.Errorf("decode docker container inspect: %w", err)
	}
	return got, nil
}

// state maps the engine's container state to the run's.
func state(engine string) dispatch.State {
	switch engine {
	case "created":
		return dispatch.StatePending
	case "running", "paused", "restarting", "removing":
		return dispatch.StateRunning
	case "exited":
		return dispatch.StateComplete
	}
	return dispatch.StateLost // dead, or anything new
}

func zeroIfUnset(t time.Time) time.Time {
	if t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// metaFromLabels rebuilds Meta when the task directory is gone.
func metaFromLabels(l map[string]string) dispatch.Meta {
	n, _ := strconv.Atoi(l[labelNumber])
	a, _ := strconv.Atoi(l[labelAttempt])
	inst, _ := strconv.ParseInt(l[labelInstallation], 10, 64)
	repoID, _ := strconv.ParseInt(l[labelRepoID], 10, 64)
	m := dispatch.Meta{
		RepoID: repoID,
		TaskID: l[labelTask], Mode: dispatch.Mode(l[labelMode]), Repo: l[labelRepo],
		Number: n, Attempt: a, InstallationID: inst, DeliveryID: l[labelDelivery],
	}
	if set := strings.Split(l[labelSet], "/"); len(set) == 3 && set[0] != "" {
		m.Set = set[0]
		m.Variant, _ = strconv.Atoi(set[1])
		m.Variants, _ = strconv.Atoi(set[2])
	}
	return m
}

func (b *watcher) status(c inspected, rec *record) dispatch.RunStatus {
	st := dispatch.RunStatus{
		State:     state(c.State.Status),
		ExitCode:  c.State.ExitCode,
		StartedAt: zeroIfUnset(c.State.StartedAt),
		EndedAt:   zeroIfUnset(c.State.FinishedAt),
	}
	if rec != nil {
		st.Meta = rec.Meta
	} else {
		st.Meta = metaFromLabels(c.Config.Labels)
	}
	if !st.State.Ended() {
		st.EndedAt = time.Time{}
	}
	return st
}

// Status implements dispatch.Backend.
func (b *watcher) Status(ctx context.Context, taskID string) (dispatch.RunStatus, error) {
	if st, ok := b.ended.get(taskID); ok {
		return st, nil
	}
	name, rec, err := b.lookup(ctx, taskID)
	if err != nil {
		return dispatch.RunStatus{}, err
	}
	got, err := b.inspect(ctx, name)
	if errors.Is(err, errNoSuch) {
		if rec == nil {
			return dispatch.RunStatus{}, dispatch.ErrNotFound
		}
		return b.orphan(rec), nil
	}
	if err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("docker backend: %w", err)
	}
	st := b.status(got[0], rec)
	if st.State.Ended() {
		b.ended.put(taskID, st)
	}
	return st, nil
}

// orphanGrace is how long a task directory may exist without its container
// before the run counts as lost: Submit writes the directory first.
const orphanGrace = time.Minute

// orphan is the status of a task directory without a container.
func (b *watcher) orphan(rec *record) dispatch.RunStatus {
	st := dispatch.RunStatus{Meta: rec.Meta, State: dispatch.StateLost}
	if time.Since(rec.SubmittedAt) < orphanGrace {
		st.State = dispatch.StatePending
	}
	return st
}

// List implements dispatch.Backend: every container of this data directory
// and every task directory whose container is gone.
func (b *watcher) List(ctx context.Context) ([]dispatch.RunStatus, error) {
	out, err := b.cli.run(ctx, "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label="+labelManaged+"=true",
		"--filter", "label="+labelDataDir+"="+b.o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	var runs []dispatch.RunStatus
	seen := map[string]bool{}
	if names := strings.Fields(out); len(names) > 0 {
		got, err := b.inspect(ctx, names...)
		if err != nil && !errors.Is(err, errNoSuch) {
			return nil, fmt.Errorf("docker backend: %w", err)
		}
		for _, c := range got {
			id := c.Config.Labels[labelTask]
			rec, _ := b.readRecord(id)
			runs = append(runs, b.status(c, rec))
			seen[id] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(b.o.DataDir, "tasks"))
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || seen[e.Name()] || !dispatch.ValidTaskID(e.Name()) {
			continue
		}
		if rec, err := b.readRecord(e.Name()); err == nil {
			runs = append(runs, b.orphan(rec))
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Meta.TaskID < runs[j].Meta.TaskID })
	return runs, nil
}

// Result implements dispatch.Backend.
func (b *watcher) Result(ctx context.Context, taskID string) (*dispatch.Result, error) {
	if _, err := os.Stat(b.TaskDir(taskID)); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, dispatch.ErrNotFound)
	}
	if err := b.notRunning(ctx, taskID); err != nil {
		return nil, err
	}
	// out/ is bind-mounted into the sandbox: whatever is there, the
	// sandbox made.
	r, err := dispatch.ReadResultFile(b.TaskDir(taskID), "out/"+dispatch.ResultFile)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, err)
	}
	return r, nil
}

// notRunning returns ErrRunning while the run's container has not ended.
// A task directory whose container cannot be found is left to the caller:
// it reads what the directory holds.
func (b *watcher) notRunning(ctx context.Context, taskID string) error {
	st, err := b.Status(ctx, taskID)
	switch {
	case errors.Is(err, dispatch.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !st.State.Ended():
		return fmt.Errorf("docker backend: %s is %s: %w", taskID, st.State, dispatch.ErrRunning)
	}
	return nil
}
