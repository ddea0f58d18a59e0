package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
)

// Runs follows every run this bot replica started or found on the backend,
// from submission to the result on GitHub: progress on a check run, token
// refreshes while it lives, then the plan comment, PR, or failure comment,
// and automatic continue runs after an interruption.
type Runs struct {
	c *core
	// start starts a run (Base.start): the continuation of an interrupted
	// one.
	start func(ctx context.Context, client *github.Client, req startRequest) error

	mu        sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	following map[string]bool
	aborted   map[string]string // task id -> who aborted
	tokens    runTokens         // every token minted for a live run (tokens.go)
	// onEnd frees an ended run's queue slot and onReconcile admits what
	// waits (queue.go); queuedStarts counts admitted runs being started.
	onEnd        func(ctx context.Context, taskID string)
	onReconcile  func(ctx context.Context)
	queuedStarts atomic.Int64
	wg           sync.WaitGroup
	logger       zerolog.Logger
}

func newRuns(c *core, start func(context.Context, *github.Client, startRequest) error) *Runs {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runs{c: c, start: start, ctx: ctx, cancel: cancel, following: map[string]bool{}, aborted: map[string]string{}, logger: zerolog.Nop()}
}

// SetLogger sets the logger followers start from.
func (r *Runs) SetLogger(l zerolog.Logger) { r.logger = l }

// Reconcile follows every run the backend knows, so runs that ended while
// the bot was down get their results posted, and waits for the review
// batches pending in it (batch.go). Safe to call more than once.
func (r *Runs) Reconcile(ctx context.Context) error {
	runs, err := r.c.Backend.List(ctx)
	if err != nil {
		return fmt.Errorf("list runs on %s backend: %w", r.c.Backend.Name(), err)
	}
	for _, st := range runs {
		r.Follow(st.Meta)
	}
	r.logger.Info().Int("runs", len(runs)).Str("backend", r.c.Backend.Name()).Msg("reconciled runs")
	if r.onReconcile != nil {
		r.onReconcile(r.logger.WithContext(r.ctx))
	}
	return r.c.batches.recover(r.logger.WithContext(ctx))
}

// Follow starts following a run unless it is already followed.
func (r *Runs) Follow(meta dispatch.Meta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.following[meta.TaskID] || r.ctx.Err() != nil {
		return
	}
	r.following[meta.TaskID] = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.following, meta.TaskID)
			r.mu.Unlock()
		}()
		r.follow(meta)
	}()
}

// Active returns the task ids being followed.
func (r *Runs) Active() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.following {
		ids = append(ids, id)
	}
	return ids
}

// Stop stops following (the runs go on; a restarted bot reconciles them)
// and waits for followers to return.
func (r *Runs) Stop() {
	r.c.batches.stop()
	r.cancel()
	r.wg.Wait()
}

// Wait blocks until no run is followed (tests, draining).
func (r *Runs) Wait() { r.wg.Wait() }

// MarkAborted records that a person aborted the run, so its interrupted
// result is not continued automatically.
func (r *Runs) MarkAborted(taskID, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aborted[taskID] = by
}

func (r *Runs) abortedBy(taskID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	by, ok := r.aborted[taskID]
	return by, ok
}

func (r *Runs) follow(meta dispatch.Meta) {
	owner, repo, _ := strings.Cut(meta.Repo, "/")
	log := r.logger.With().Str("task_id", meta.TaskID).Str("repo", meta.Repo).Int("issue", meta.Number).
		Str("mode", string(meta.Mode)).Str("delivery_id", meta.DeliveryID).Logger()
	ctx := log.WithContext(r.ctx)
	client, err := r.c.NewInstallationClient(meta.InstallationID)
	if err != nil {
		log.Error().Err(err).Msg("cannot follow run: no installation client")
		return
	}
	prog := newProgress(ctx, r.c, client, owner, repo, meta)
	r.adoptToken(ctx, meta.TaskID)
	refreshDone, refreshed := make(chan struct{}), make(chan struct{})
	go func() { defer close(refreshed); r.refreshTokens(ctx, meta, refreshDone) }()
	st, err := r.c.Backend.Wait(ctx, meta.TaskID, prog.update)
	close(refreshDone)
	<-refreshed // no refresh mints a token after the run's are revoked
	if ctx.Err() != nil {
		return // shutting down: the run goes on and is reconciled later
	}
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		log.Error().Err(err).Msg("lost track of run")
		return
	}
	if errors.Is(err, dispatch.ErrNotFound) {
		log.Warn().Msg("run vanished from the backend")
		st.State = dispatch.StateLost
	}
	r.endRun(ctx, meta.TaskID)
	if r.onEnd != nil {
		r.onEnd(ctx, meta.TaskID)
	}
	res, rerr := r.c.Backend.Result(ctx, meta.TaskID)
	if errors.Is(rerr, dispatch.ErrBadResult) {
		log.Error().Err(rerr).Msg("result.json rejected; reporting the run as failed")
		res = rejectedResult(meta, rejectedMessage)
	} else if rerr != nil && !errors.Is(rerr, dispatch.ErrNoResult) && !errors.Is(rerr, dispatch.ErrNotFound) {
		log.Error().Err(rerr).Msg("read result.json")
		res = nil
	}
	if res != nil && res.TaskID != meta.TaskID {
		log.Error().Str("result_task", res.TaskID).Msg("result.json belongs to another task; ignoring it")
		res = nil
	}
	if err := untilPosted(ctx, &log, r.c.ResultRetry, func() error { return r.finish(ctx, client, owner, repo, meta, res, prog) }); err != nil {
		log.Error().Err(err).Msg("post result")
		// Keep the run and the lock: a restart reconciles and tries again.
		return
	}
	log.Info().Msg("result posted")
	r.afterPRRun(ctx, client, meta, res)
	// The result is on GitHub: finish the bookkeeping even if the bot is
	// shutting down, or the next start would find the run again.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := r.c.Backend.Unlock(done, dispatch.LockKey(meta.Repo, meta.Number), meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("release lock")
	}
	r.keepSession(done, meta, res)
	if err := r.c.Backend.Cleanup(done, meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("clean up run")
	}
	log.Info().Msg("run finished and reported")
}

// finish posts what the run produced. It is idempotent: if a comment with
// this task's result marker exists (posted before a restart), it does not
// post again.
func (r *Runs) finish(ctx context.Context, client *github.Client, owner, repo string, meta dispatch.Meta, res *dispatch.Result, prog *progress) error {
	log := zerolog.Ctx(ctx)
	marked, err := r.c.botMarked(ctx, client, owner, repo, meta.Number)
	if err != nil {
		return err
	}
	for _, m := range marked {
		if m.Marker.TaskID == meta.TaskID && (m.Marker.Kind == KindPlan || m.Marker.Kind == KindResult || m.Marker.Kind == KindFailure || m.Marker.Kind == KindAborted) {
			log.Info().Str("kind", m.Marker.Kind).Msg("result already posted")
			return nil
		}
	}
	ack, _ := lastMarked(marked, KindAck, meta.TaskID)
	issue := ack.Marker.Issue
	if issue == 0 {
		issue = meta.Number
	}
	rc := &runContext{meta: meta, owner: owner, repo: repo, issue: issue, round: ack.Marker.Round, branch: ack.Marker.Branch, marked: marked}
	if res != nil && meta.Mode == dispatch.ModePlan {
		// Of the plan as the runner wrote it, before it is made safe to
		// post: the digest the session archive carries.
		rc.planDigest = agentsession.PlanDigest(res.Plan)
	}
	res = r.vetResult(rc, res)
	defer r.keepReceipt(ctx, rc, res)

	status := dispatch.StatusInterrupted
	if res != nil {
		status = res.Status
	}
	// An abort is remembered in memory and in the /abort reply's marker, so
	// a bot restarted between /abort and the run's end does not continue it.
	by, aborted := r.abortedBy(meta.TaskID)
	if !aborted {
		_, aborted = lastMarked(marked, KindAbortRequested, meta.TaskID)
	}
	if aborted {
		prog.complete(ctx, "cancelled", "Aborted", "The run was aborted.", res)
		r.c.setState(ctx, client, owner, repo, meta.Number, "")
		return r.c.reply(ctx, client, owner, repo, meta.Number, "github/aborted", AbortedData{
			Receipt: rc.receipt(res), By: by,
			Marker: Marker{Kind: KindAborted, TaskID: meta.TaskID, Mode: meta.Mode, Issue: issue, Branch: rc.branch}.String(),
		})
	}
	if status == dispatch.StatusInterrupted {
		return r.continueRun(ctx, client, rc, res, prog)
	}
	if status != dispatch.StatusCompleted {
		return r.fail(ctx, client, rc, res, prog)
	}
	switch meta.Mode {
	case dispatch.ModePlan:
		return r.postPlan(ctx, client, rc, res, prog)
	case dispatch.ModeExecute, dispatch.ModeContinue:
		return r.openPR(ctx, client, rc, res, prog)
	case dispatch.ModeTask:
		return r.postTaskResult(ctx, client, rc, res, prog)
	default: // revise, rebase: a receipt comment where the run was asked for
		prog.complete(ctx, "success", "Done", res.PRSummary, res)
		r.c.setState(ctx, client, owner, repo, meta.Number, LabelDone)
		rcpt := rc.receipt(res)
		return r.c.reply(ctx, client, owner, repo, meta.Number, "github/done", DoneData{Receipt: rcpt, Marker: rcpt.marker(KindResult)})
	}
}

// runContext is what finishing a run needs to know about where it came from.
type runContext struct {
	meta        dispatch.Meta
	owner, repo string
	issue       int
	round       int
	branch      string
	marked      []markedComment
	// planDigest binds a plan run's session to the plan it wrote.
	planDigest string
}

// receipt is what the run did and where it came from.
func (rc *runContext) receipt(res *dispatch.Result) Receipt {
	branch := rc.branch
	if res != nil && res.Branch != "" {
		branch = res.Branch
	}
	return Receipt{
		TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Repo: rc.meta.Repo, Issue: rc.issue, Number: rc.meta.Number,
		Branch: branch, Attempt: rc.meta.Attempt, Round: rc.round, Result: res,
	}
}

// mediaBase is the permanent URL prefix of media committed by the run: the
// raw file at the media commit, so links survive later pushes.
func (r *Runs) mediaBase(rc *runContext, res *dispatch.Result) string {
	if res == nil || res.MediaCommit == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/raw/%s/", strings.TrimSuffix(r.c.WebURL, "/"), rc.meta.Repo, res.MediaCommit)
}

func (r *Runs) postPlan(ctx context.Context, client *github.Client, rc *runContext, res *dispatch.Result, prog *progress) error {
	data := PlanCommentData{
		Receipt: rc.receipt(res), MaxRounds: r.c.MaxPlanRounds, CostSoFar: r.costSoFar(rc, res), PlanStart: planStart, PlanEnd: planEnd,
	}
	data.Round = max(rc.round, 1)
	data.Marker = Marker{Kind: KindPlan, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue, Round: data.Round, Cost: roundCost(res), PlanSHA: rc.planDigest}.String()
	prog.complete(ctx, "success", "Plan ready", "The plan is posted on the issue.", res)
	r.c.setState(ctx, client, rc.owner, rc.repo, rc.meta.Number, LabelAwaitingApproval)
	return r.c.reply(ctx, client, rc.owner, rc.repo, rc.meta.Number, "github/plan_comment", data)
}

// costSoFar adds up the costs of this issue's earlier plan rounds.
func (r *Runs) costSoFar(rc *runContext, res *dispatch.Result) float64 {
	total := 0.0
	if res != nil {
		total = res.TokenUsage.TotalCostUSD
	}
	for _, m := range rc.marked {
		if m.Marker.Kind == KindPlan {
			total += m.Marker.Cost
		}
	}
	return total
}

// roundCost is what a plan round cost, carried in its marker so the running
// total does not depend on the wording of the plan comment.
func roundCost(res *dispatch.Result) float64 {
	if res == nil {
		return 0
	}
	return res.TokenUsage.TotalCostUSD
}

func (r *Runs) fail(ctx context.Context, client *github.Client, rc *runContext, res *dispatch.Result, prog *progress) error {
	rcpt := rc.receipt(res)
	data := FailureData{Receipt: rcpt, Marker: rcpt.marker(KindFailure), Retry: "/retry"}
	prog.attach(headOf(res))
	conclusion := "failure"
	if res != nil && res.Status == dispatch.StatusTimeout {
		conclusion = "timed_out"
	}
	prog.complete(ctx, conclusion, "Run "+string(statusOf(res)), errorMessage(res), res)
	r.c.setState(ctx, client, rc.owner, rc.repo, rc.meta.Number, LabelFailed)
	return r.c.reply(ctx, client, rc.owner, rc.repo, rc.meta.Number, "github/failure", data)
}

// continueRun resumes an interrupted run in continue mode, a bounded number
// of times, and otherwise reports the interruption as a failure.
func (r *Runs) continueRun(ctx context.Context, client *github.Client, rc *runContext, res *dispatch.Result, prog *progress) error {
	log := zerolog.Ctx(ctx)
	if rc.meta.Attempt > r.c.MaxContinues {
		log.Info().Int("attempt", rc.meta.Attempt).Msg("interrupted too often; giving up")
		return r.fail(ctx, client, rc, res, prog)
	}
	prog.complete(ctx, "neutral", "Interrupted; continuing", "The sandbox stopped before the run finished; a continue run picks up the pushed work.", res)
	repo, _, err := client.Repositories.Get(ctx, rc.owner, rc.repo)
	if err != nil {
		return fmt.Errorf("read repository: %w", err)
	}
	mode := dispatch.ModeContinue
	switch rc.meta.Mode {
	case dispatch.ModePlan, dispatch.ModeRebase, dispatch.ModeTask, dispatch.ModeRevise:
		mode = rc.meta.Mode // these start over; only code-writing runs resume a branch
	}
	branch := rc.branch
	if res != nil && res.Branch != "" {
		branch = res.Branch
	}
	req := startRequest{
		InstallationID: rc.meta.InstallationID, Repo: repo, Number: rc.meta.Number, Issue: rc.issue,
		IsPR: rc.meta.Number != rc.issue, Mode: mode, Trigger: fmt.Sprintf("%s-continue-%d", rc.meta.TaskID, rc.meta.Attempt),
		DeliveryID: rc.meta.DeliveryID, Attempt: rc.meta.Attempt + 1, Branch: branch, Round: rc.round,
	}
	if plan, ok := lastMarked(rc.marked, KindPlan, ""); ok {
		req.Plan = extractPlan(plan.Comment.GetBody())
	}
	// The lock passes from the interrupted run to its continuation.
	if err := r.c.Backend.Unlock(ctx, dispatch.LockKey(rc.meta.Repo, rc.meta.Number), rc.meta.TaskID); err != nil {
		return fmt.Errorf("release lock for continue run: %w", err)
	}
	return r.start(ctx, client, req)
}

func headOf(res *dispatch.Result) string {
	if res == nil {
		return ""
	}
	return res.HeadSHA
}

func statusOf(res *dispatch.Result) dispatch.Status {
	if res == nil {
		return dispatch.StatusInterrupted
	}
	return res.Status
}

func errorMessage(res *dispatch.Result) string {
	if res == nil {
		return "The sandbox ended without leaving a receipt."
	}
	if res.Error != nil {
		return res.Error.Message
	}
	return string(res.Status)
}
