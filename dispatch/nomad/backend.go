package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Backend runs sandboxes on a Nomad cluster. Create it with New; Close it to
// stop the shared event stream.
type Backend struct {
	o   Options
	c   *api.Client
	log zerolog.Logger
	w   *watcher
	// gz reuses gzip writers for the queue (queue.go).
	gz sync.Pool
	// allocs caches the running allocation of a run for the exec
	// sessions of its preview and screencast (exec.go).
	allocs allocCache
}

var _ dispatch.Backend = (*Backend)(nil)

// New checks the options and connects nothing yet: the first call that needs
// Nomad does.
func New(o Options) (*Backend, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	c := o.Client
	if c == nil {
		cfg := o.Config
		if cfg == nil {
			cfg = api.DefaultConfig()
		}
		var err error
		if c, err = api.NewClient(cfg); err != nil {
			return nil, fmt.Errorf("nomad backend: client for %s: %w", cfg.Address, err)
		}
	}
	b := &Backend{o: o, c: c, log: o.Logger.With().Str("backend", "nomad").Logger()}
	b.w = newWatcher(b)
	return b, nil
}

// Close stops the event stream; Waits in progress return an error and
// close their log streams.
func (b *Backend) Close() error {
	b.w.close()
	return nil
}

// Name implements dispatch.Backend.
func (b *Backend) Name() string { return "nomad" }

// qopts and wopts address the sandboxes' namespace: their jobs,
// allocations, events and token Variables.
func (b *Backend) qopts(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: b.o.Namespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *Backend) wopts(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: b.o.Namespace, Region: b.o.Region}).WithContext(ctx)
}

// stateQ and stateW address the bot's own Variables (locks, the queue,
// kept sessions), in Options.StateNamespace: the bot's own namespace
// unless set, which no sandbox job shares.
func (b *Backend) stateQ(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: b.o.StateNamespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *Backend) stateW(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: b.o.StateNamespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *Backend) runLogger(m dispatch.Meta, jobID string) zerolog.Logger {
	l := b.log.With().Str("task_id", m.TaskID).Str("job_id", jobID)
	if m.Repo != "" {
		l = l.Str("repo", m.Repo)
	}
	if m.Number > 0 {
		l = l.Int("number", m.Number)
	}
	return l.Logger()
}

// Submit implements dispatch.Backend: it writes the token Variable, then
// registers the job create-only. A job that exists already, because the
// webhook was redelivered or another replica got there first, is success
// with created=false.
func (b *Backend) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	if spec.Meta.TaskID == "" {
		spec.Meta.TaskID = spec.Order.TaskID
	}
	if spec.Meta.Mode == "" {
		spec.Meta.Mode = spec.Order.Mode
	}
	if spec.Order.Mode == dispatch.ModePreview {
		// The code would travel in the job (Nomad keeps it in its log);
		// previews of a pull request run on the docker backend.
		return false, fmt.Errorf("submit %s: previews are not supported on the nomad backend yet", spec.Order.TaskID)
	}
	if spec.Order.Mode != dispatch.ModeTask && spec.Token == "" {
		return false, fmt.Errorf("submit %s: a repository token is required in %s mode", spec.Order.TaskID, spec.Order.Mode)
	}
	job, err := BuildJob(b.o, spec)
	if err != nil {
		return false, fmt.Errorf("submit %s: %w", spec.Order.TaskID, err)
	}
	id := *job.ID
	log := b.runLogger(spec.Meta, id)

	// A redelivery must not rewrite the token of a run that has already
	// ended and had its Variable removed.
	if _, _, err := b.c.Jobs().Info(id, b.qopts(ctx)); err == nil {
		log.Info().Msg("run exists already; not submitting again")
		b.w.remember(spec.Meta.TaskID, id)
		return false, nil
	} else if !isNotFound(err) {
		return false, fmt.Errorf("submit %s: look up job %s: %w", spec.Order.TaskID, id, err)
	}

	hasToken := spec.Token != "" || len(b.o.Env) > 0 || b.o.Gateway != nil
	if hasToken {
		if err := b.writeToken(ctx, id, spec.Token); err != nil {
			return false, fmt.Errorf("submit %s: %w", spec.Order.TaskID, err)
		}
	}
	resp, _, err := b.c.Jobs().RegisterOpts(job, &api.RegisterOptions{EnforceIndex: true, ModifyIndex: 0}, b.wopts(ctx))
	if err != nil {
		if isAlreadyExists(err) {
			// Another replica registered it between our look-up and
			// now; its sandbox reads the Variable we both wrote.
			log.Info().Msg("run registered concurrently by another bot; not submitting again")
			b.w.remember(spec.Meta.TaskID, id)
			return false, nil
		}
		if hasToken {
			b.deleteToken(context.WithoutCancel(ctx), id, log)
		}
		return false, fmt.Errorf("submit %s: register job %s at %s: %w", spec.Order.TaskID, id, b.c.Address(), err)
	}
	b.w.remember(spec.Meta.TaskID, id)
	log.Info().Str("eval_id", resp.EvalID).Str("mode", string(spec.Order.Mode)).Int("attempt", spec.Meta.Attempt).Msg("sandbox job registered")
	return true, nil
}

// writeToken stores the token where the job's template reads it. The
// value never reaches a log line or an error message.
func (b *Backend) writeToken(ctx context.Context, jobID, token string) error {
	items := api.VariableItems{TokenItem: token}
	for k, val := range b.o.Env {
		items[EnvItemPrefix+k] = val
	}
	if err := b.addGatewayItem(items); err != nil {
		return err
	}
	v := &api.Variable{Namespace: b.o.Namespace, Path: TokenVarPath(jobID), Items: items}
	if _, _, err := b.c.Variables().Update(v, b.wopts(ctx)); err != nil {
		return fmt.Errorf("write token variable %s: %w", TokenVarPath(jobID), err)
	}
	return nil
}

func (b *Backend) deleteToken(ctx context.Context, jobID string, log zerolog.Logger) {
	if _, err := b.c.Variables().Delete(TokenVarPath(jobID), b.wopts(ctx)); err != nil && !isNotFound(err) {
		log.Warn().Err(err).Str("variable", TokenVarPath(jobID)).Msg("could not remove the token variable; it expires within the hour")
	}
}

// findJob resolves a task id to its job: from the watcher's memory, else by
// listing job ids with the task's prefix.
func (b *Backend) findJob(ctx context.Context, taskID string) (string, error) {
	if !dispatch.ValidTaskID(taskID) {
		return "", fmt.Errorf("task id %q is not of the form T-XXXXXXXX: %w", taskID, dispatch.ErrNotFound)
	}
	if id, ok := b.w.known(taskID); ok {
		return id, nil
	}
	stubs, _, err := b.c.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}},
		withPrefix(b.qopts(ctx), jobPrefixOf(b.o.JobPrefix, taskID)))
	if err != nil {
		return "", fmt.Errorf("look up the job of %s: %w", taskID, err)
	}
	var best *api.JobListStub
	for _, s := range stubs {
		if !strings.EqualFold(s.Meta[MetaTaskID], taskID) && s.Meta[MetaTaskID] != "" {
			continue
		}
		if best == nil || s.SubmitTime > best.SubmitTime {
			best = s
		}
	}
	if best == nil {
		return "", fmt.Errorf("no job for %s: %w", taskID, dispatch.ErrNotFound)
	}
	b.w.remember(taskID, best.ID)
	return best.ID, nil
}

func withPrefix(q *api.QueryOptions, prefix string) *api.QueryOptions {
	q.Prefix = prefix
	return q
}

// Status implements dispatch.Backend.
func (b *Backend) Status(ctx context.Context, taskID string) (dispatch.RunStatus, error) {
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

// fetchView reads a job and its allocations.
func (b *Backend) fetchView(ctx context.Context, jobID string) (*runView, error) {
	job, _, err := b.c.Jobs().Info(jobID, b.qopts(ctx))
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("job %s: %w", jobID, dispatch.ErrNotFound)
		}
		return nil, fmt.Errorf("read job %s: %w", jobID, err)
	}
	allocs, _, err := b.c.Jobs().Allocations(jobID, false, b.qopts(ctx))
	if err != nil {
		return nil, fmt.Errorf("read allocations of job %s: %w", jobID, err)
	}
	v := newRunView(jobID)
	v.setJob(job)
	for _, a := range allocs {
		v.mergeStub(a)
	}
	return v, nil
}

// List implements dispatch.Backend: every job with the bot's prefix and
// task meta, for reconciliation after a restart.
func (b *Backend) List(ctx context.Context) ([]dispatch.RunStatus, error) {
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
func (b *Backend) classify(ctx context.Context, v *runView) dispatch.RunStatus {
	st := v.status()
	if st.State == dispatch.StateComplete && v.killed() {
		if _, err := b.readResult(ctx, v); errors.Is(err, dispatch.ErrNoResult) {
			st.State = dispatch.StateLost
		}
	}
	return st
}

// Result implements dispatch.Backend.
func (b *Backend) Result(ctx context.Context, taskID string) (*dispatch.Result, error) {
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

// endedView is the run of taskID once it has ended: ErrRunning before,
// ErrNotFound for an unknown task. what names the caller's errand.
func (b *Backend) endedView(ctx context.Context, what, taskID string) (*runView, error) {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return nil, err
	}
	v, err := b.fetchView(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", what, taskID, err)
	}
	if st := v.status(); !st.State.Ended() {
		return nil, fmt.Errorf("%s of %s: job %s is %s: %w", what, taskID, id, st.State, dispatch.ErrRunning)
	}
	return v, nil
}

// readResult cats alloc/data/result.json of the run's latest allocation.
// The watcher keeps what it read so the node is asked once.
func (b *Backend) readResult(ctx context.Context, v *runView) ([]byte, error) {
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

// Cancel implements dispatch.Backend by deregistering the job without
// purging it: Nomad sends SIGTERM and waits the task's kill_timeout before
// SIGKILL, and the stopped job stays readable for its result.
func (b *Backend) Cancel(ctx context.Context, taskID string) error {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return err
	}
	evalID, _, err := b.c.Jobs().DeregisterOpts(id, &api.DeregisterOptions{Purge: false}, b.wopts(ctx))
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("cancel %s: job %s: %w", taskID, id, dispatch.ErrNotFound)
		}
		return fmt.Errorf("cancel %s: deregister job %s: %w", taskID, id, err)
	}
	b.log.Info().Str("task_id", taskID).Str("job_id", id).Str("eval_id", evalID).Dur("kill_timeout", b.o.KillTimeout).Msg("sandbox job stopped; the runner has its kill timeout to push")
	return nil
}

// RefreshToken implements dispatch.Backend. The template's change_mode is
// noop: the runner reads the file on every git call.
func (b *Backend) RefreshToken(ctx context.Context, taskID, token string) error {
	if token == "" {
		return fmt.Errorf("refresh token of %s: the new token is empty", taskID)
	}
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return err
	}
	job, _, err := b.c.Jobs().Info(id, b.qopts(ctx))
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("refresh token of %s: job %s: %w", taskID, id, dispatch.ErrNotFound)
		}
		return fmt.Errorf("refresh token of %s: read job %s: %w", taskID, id, err)
	}
	if (job.Stop != nil && *job.Stop) || (job.Status != nil && *job.Status == "dead") {
		// Writing it now would leave a live token in Nomad for nobody.
		return fmt.Errorf("refresh token of %s: job %s has ended; nothing written", taskID, id)
	}
	if err := b.writeToken(ctx, id, token); err != nil {
		return fmt.Errorf("refresh token of %s: %w", taskID, err)
	}
	b.log.Info().Str("task_id", taskID).Str("job_id", id).Msg("token refreshed")
	return nil
}

// Cleanup implements dispatch.Backend: the token Variable goes, and the job
// is purged (Options.Purge) or stopped and left to Nomad's job GC.
func (b *Backend) Cleanup(ctx context.Context, taskID string) error {
	id, err := b.findJob(ctx, taskID)
	if errors.Is(err, dispatch.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	log := b.log.With().Str("task_id", taskID).Str("job_id", id).Logger()
	if _, err := b.c.Variables().Delete(TokenVarPath(id), b.wopts(ctx)); err != nil && !isNotFound(err) {
		return fmt.Errorf("cleanup %s: delete token variable %s: %w", taskID, TokenVarPath(id), err)
	}
	job, _, err := b.c.Jobs().Info(id, b.qopts(ctx))
	switch {
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("cleanup %s: read job %s: %w", taskID, id, err)
	case b.o.Purge || job.Stop == nil || !*job.Stop:
		if _, _, err := b.c.Jobs().DeregisterOpts(id, &api.DeregisterOptions{Purge: b.o.Purge}, b.wopts(ctx)); err != nil && !isNotFound(err) {
			return fmt.Errorf("cleanup %s: deregister job %s: %w", taskID, id, err)
		}
	}
	b.w.forget(taskID, id)
	log.Info().Bool("purged", b.o.Purge).Msg("sandbox job cleaned up")
	return nil
}

// ---- errors ----------------------------------------------------------------

func statusCode(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	if statusCode(err) == http.StatusNotFound {
		return true
	}
	return errors.Is(err, api.ErrVariablePathNotFound)
}

func isAlreadyExists(err error) bool {
	return err != nil && strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix) && strings.Contains(err.Error(), "already exists")
}

func isTerminalClient(s string) bool {
	switch s {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
