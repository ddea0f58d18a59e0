package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// Backend runs sandboxes on a Nomad cluster. Create it with New; Close it to
// stop the shared event stream.
//
// It is an adapter and nothing more: each interface it offers is served by
// a part named for what it does, every part pointing to the same shared
// state (the cluster's client and options, the watcher), built in New.
type Backend struct {
	// *shared is embedded here too, so that Name and what the parts share
	// resolve here first rather than through several parts at once.
	*shared
	// *watcher is the one event stream every Wait follows (EventStream).
	*watcher
	*jobs         // Submit, Cancel, RefreshToken, Cleanup, CurrentToken: a run's job and token Variable
	*runWatch     // Status, List, Wait, Result: what a run is doing and what it left
	*lockVars     // Lock, Unlock, Holder, ListLocks: the per-issue locks in Variables
	*queueVars    // UpdateQueue, ReadQueue, SaveQueued, LoadQueued, DropQueued
	*bookVars     // the routine books and the budget book in Variables
	*sessions     // KeepSession, KeptSession, MaxImageBytes: what a job carries from a plan run
	*execSessions // DialPreview, DialScreencast: exec sessions in the live allocation
	*artifacts    // Artifacts: what an ended allocation left in its artifacts directory
	*readiness    // Ready: whether the cluster can take a sandbox
}

// EventStream is the backend's one shared event stream as its owner and
// its tests see it: how often it connected and the last index it applied
// (for tests and metrics), and Close to stop it. It is the nomad backend's
// own, so it is declared here rather than in dispatch.
type EventStream interface {
	Connects() int
	LastEventIndex() uint64
	Close() error
}

// Every interface the backend offers, asserted so that a part added with a
// method of the same name as another's (which would hide both) fails to
// build rather than drop a capability the bot looks for at run time.
var (
	_ dispatch.Backend          = (*Backend)(nil)
	_ dispatch.LockLister       = (*Backend)(nil)
	_ dispatch.TokenReader      = (*Backend)(nil)
	_ dispatch.SessionKeeper    = (*Backend)(nil)
	_ dispatch.ImageCarrier     = (*Backend)(nil)
	_ dispatch.ArtifactReader   = (*Backend)(nil)
	_ dispatch.PreviewDialer    = (*Backend)(nil)
	_ dispatch.ScreencastDialer = (*Backend)(nil)
	_ dispatch.ReadinessChecker = (*Backend)(nil)
	_ budget.Book               = (*Backend)(nil)
	_ EventStream               = (*Backend)(nil)
)

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
	cl := &cluster{o: o, c: c, log: o.Logger.With().Str("backend", "nomad").Logger()}
	w := newWatcher(cl)
	s := &shared{cluster: cl, w: w}
	docs := &varDocs{cluster: cl}
	return &Backend{
		shared:       s,
		watcher:      w,
		jobs:         &jobs{s},
		runWatch:     &runWatch{s},
		lockVars:     &lockVars{cl},
		queueVars:    &queueVars{docs},
		bookVars:     &bookVars{docs},
		sessions:     &sessions{s},
		execSessions: &execSessions{shared: s},
		artifacts:    &artifacts{s},
		readiness:    &readiness{cl},
	}, nil
}

// cluster is the Nomad API as every part addresses it: the options, the
// client and the backend's logger.
type cluster struct {
	o   Options
	c   *api.Client
	log zerolog.Logger
}

// qopts and wopts address the sandboxes' namespace: their jobs,
// allocations, events and token Variables.
func (b *cluster) qopts(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: b.o.Namespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *cluster) wopts(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: b.o.Namespace, Region: b.o.Region}).WithContext(ctx)
}

// stateQ and stateW address the bot's own Variables (locks, the queue,
// kept sessions), in Options.StateNamespace: the bot's own namespace
// unless set, which no sandbox job shares.
func (b *cluster) stateQ(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: b.o.StateNamespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *cluster) stateW(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: b.o.StateNamespace, Region: b.o.Region}).WithContext(ctx)
}

func (b *cluster) runLogger(m dispatch.Meta, jobID string) zerolog.Logger {
	l := b.log.With().Str("task_id", m.TaskID).Str("job_id", jobID)
	if m.Repo != "" {
		l = l.Str("repo", m.Repo)
	}
	if m.Number > 0 {
		l = l.Int("number", m.Number)
	}
	return l.Logger()
}

// fetchView reads a job and its allocations.
func (b *cluster) fetchView(ctx context.Context, jobID string) (*runView, error) {
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

// shared is what the parts acting on one run have in common: the cluster
// and the watcher, which knows the job of each task id and keeps the
// results it read.
type shared struct {
	*cluster
	w *watcher
}

// Name implements dispatch.Backend.
func (b *shared) Name() string { return "nomad" }

// deleteToken removes the run's token Variable: Submit when the job could
// not be registered, Wait once the run has ended.
func (b *shared) deleteToken(ctx context.Context, jobID string, log zerolog.Logger) {
	if _, err := b.c.Variables().Delete(TokenVarPath(jobID), b.wopts(ctx)); err != nil && !isNotFound(err) {
		log.Warn().Err(err).Str("variable", TokenVarPath(jobID)).Msg("could not remove the token variable; it expires within the hour")
	}
}

// findJob resolves a task id to its job: from the watcher's memory, else by
// listing job ids with the task's prefix.
func (b *shared) findJob(ctx context.Context, taskID string) (string, error) {
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

// endedView is the run of taskID once it has ended: ErrRunning before,
// ErrNotFound for an unknown task. what names the caller's errand.
func (b *shared) endedView(ctx context.Context, what, taskID string) (*runView, error) {
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
