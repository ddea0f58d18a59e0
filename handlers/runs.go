package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Runs follows every run this bot replica started or found on the backend,
// from submission to the result on GitHub: progress on a check run, token
// refreshes while it lives, then hands its end to the resultPoster (the
// plan comment, PR, or failure comment, and automatic continue runs after
// an interruption) and the resultKeeper (receipt, session, artifacts).
type Runs struct {
	c *core

	mu        sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	following map[string]bool
	aborted   map[string]string // task id -> who aborted
	tokens    runTokens         // every token minted for a live run (tokens.go)
	// slots frees an ended run's queue slot, resumes claimed runs and
	// admits what waits, and stops the claim watch (queue.go);
	// queuedStarts counts admitted runs being started.
	slots        *starter
	queuedStarts atomic.Int64
	// batches are the review batches Busy, Reconcile and Stop look after
	// (batch.go).
	batches *batches
	wg      sync.WaitGroup
	logger  zerolog.Logger
	// post posts what an ended run did; keep keeps what outlives it.
	post *resultPoster
	keep *resultKeeper
	// sets finishes the approvals of several attempts (attempts.go).
	sets *attemptSets
}

// resultPoster posts what an ended run did, as the run table says: the
// plan comment, the pull request and its history, the task's result, the
// failure or abort comment, the inline replies, or the automatic continue
// run after an interruption.
type resultPoster struct {
	c *core
	// starts starts the continuation of an interrupted run.
	starts *starter
	keep   *resultKeeper
}

// resultKeeper keeps what outlives a run and vets what the run says of
// itself: its receipt and transcript, its agent session, its artifacts,
// and the branch its result names.
type resultKeeper struct {
	c *core
	// aborted says who aborted the run, if anyone did (Runs.abortedBy).
	aborted func(taskID string) (string, bool)
}

// newRuns builds the follower: starts is how it starts continuations and
// attempts and frees queue slots, bs the review batches it waits for.
func newRuns(c *core, starts *starter, bs *batches) *Runs {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runs{c: c, ctx: ctx, cancel: cancel, following: map[string]bool{}, aborted: map[string]string{},
		logger: c.Logger, slots: starts, batches: bs}
	r.keep = &resultKeeper{c: c, aborted: r.abortedBy}
	r.post = &resultPoster{c: c, starts: starts, keep: r.keep}
	r.sets = &attemptSets{c: c, keep: r.keep, post: r.post, aborted: r.MarkAborted, starts: starts}
	return r
}

// Reconcile follows every run the backend knows, so runs that ended while
// the bot was down get their results posted, resumes the queued runs a
// stopped bot claimed and did not submit, admits what waits (queue.go),
// and waits for the review batches pending in it (batch.go). Safe to call
// more than once.
func (r *Runs) Reconcile(ctx context.Context) error {
	runs, err := r.c.Backend.List(ctx)
	if err != nil {
		return fmt.Errorf("list runs on %s backend: %w", r.c.Backend.Name(), err)
	}
	for _, st := range runs {
		place := lifecycle.OnIssue
		if lifecycle.KindOf(st.Meta.Mode).OnPR {
			place = lifecycle.OnPR
		}
		if c, _ := lifecycle.Decide(place, lifecycle.RunState(place, st.Meta.Mode), lifecycle.Restart, lifecycle.Facts{}); c.Do == lifecycle.Follow {
			r.Follow(st.Meta)
		}
	}
	r.logger.Info().Int("runs", len(runs)).Str("backend", r.c.Backend.Name()).Msg("reconciled runs")
	r.slots.resumeClaimed(r.logger.WithContext(r.ctx))
	return r.batches.recover(r.logger.WithContext(ctx))
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
	r.batches.stop()
	r.cancel()
	r.slots.claims.close()
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
	log := r.logger.With().Str("task_id", meta.TaskID).Str("repo", meta.Repo).Int("issue", meta.Number).
		Str("mode", string(meta.Mode)).Str("delivery_id", meta.DeliveryID).Logger()
	ctx := log.WithContext(r.ctx)
	gh, err := r.c.Hub.Repo(meta.InstallationID, meta.Repo)
	if err != nil {
		log.Error().Err(err).Msg("cannot follow run: no installation client")
		return
	}
	if lifecycle.KindOf(meta.Mode).Aside {
		r.followPreview(ctx, gh, meta)
		return
	}
	prog := newProgress(ctx, r.c, gh, meta)
	r.adoptToken(ctx, meta.TaskID)
	refreshDone, refreshed := make(chan struct{}), make(chan struct{})
	go func() { defer close(refreshed); r.refreshTokens(ctx, meta, refreshDone) }()
	// Every line is kept as it is read, whether or not anyone watches,
	// numbered by its place in the log (Wait reads it from its start), as
	// the live page numbers it.
	tr, seq := r.keep.transcript(ctx, gh, meta), 0
	st, err := r.c.Backend.Wait(ctx, meta.TaskID, func(p dispatch.Progress) {
		seq++
		tr.Line(seq, p)
		prog.update(p)
	})
	tr.Close(err == nil)
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
	r.slots.freeSlot(ctx, meta.TaskID)
	res := r.readResult(ctx, meta)
	// Settled before the result is posted: a continue run it starts
	// reserves against the month's spend with this run's cost in it.
	r.keep.settle(ctx, meta, res)
	// A plan's agent session is kept before the plan is posted: the plan
	// invites /approve, and the execute run it starts takes the session
	// from the backend as soon as it holds the issue.
	r.keep.keepSession(ctx, meta, res)
	if meta.Set != "" {
		// One of an approval's attempts: the approval's result waits for
		// every attempt (attempts.go), which cleans them all up.
		r.sets.endAttempt(ctx, gh, meta, res, prog)
		return
	}
	if err := untilPosted(ctx, &log, r.c.ResultRetry, func() error { return r.finish(ctx, gh, meta, res, prog) }); err != nil {
		log.Error().Err(err).Msg("post result")
		// Keep the run and the lock: a restart reconciles and tries again.
		return
	}
	log.Info().Msg("result posted")
	after, cancel := outliving(ctx)
	defer cancel()
	r.post.afterPRRun(after, gh, meta, res)
	r.release(after, meta)
	log.Info().Msg("run finished and reported")
}

// readResult is the ended run's result.json as the bot takes it: a
// rejected one becomes a failure saying so, one of another task or one
// that could not be read is none (nil).
func (r *Runs) readResult(ctx context.Context, meta dispatch.Meta) *dispatch.Result {
	log := zerolog.Ctx(ctx)
	res, err := r.c.Backend.Result(ctx, meta.TaskID)
	if errors.Is(err, dispatch.ErrBadResult) {
		log.Error().Err(err).Msg("result.json rejected; reporting the run as failed")
		return rejectedResult(meta, rejectedMessage)
	} else if err != nil && !errors.Is(err, dispatch.ErrNoResult) && !errors.Is(err, dispatch.ErrNotFound) {
		log.Error().Err(err).Msg("read result.json")
		return nil
	}
	if res != nil && res.TaskID != meta.TaskID {
		log.Error().Str("result_task", res.TaskID).Msg("result.json belongs to another task; ignoring it")
		return nil
	}
	return res
}

// release frees the issue's lock and what the run left on the backend,
// once its result is on GitHub (on a context that outlives a stop, or the
// next start would find the run again).
func (r *Runs) release(ctx context.Context, meta dispatch.Meta) {
	log := zerolog.Ctx(ctx)
	if err := r.c.Backend.Unlock(ctx, dispatch.LockKey(meta.Repo, meta.Number), meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("release lock")
	}
	if err := r.c.Backend.Cleanup(ctx, meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("clean up run")
	}
}

// outliving is ctx for what follows a posted result (its label and
// progress, the PR's history, the lock's release): it goes on when the bot
// stops, bounded by afterResultWait, since the run is released after it
// and no restart would do it again.
func outliving(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), afterResultWait)
}

// finish posts what the run produced, as the run table says for its mode
// and how it ended. It is idempotent: if a comment with this task's result
// marker exists (posted before a restart), it does not post again, and
// only shows that marker's state.
func (r *Runs) finish(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, res *dispatch.Result, prog *progress) error {
	log := zerolog.Ctx(ctx)
	marked, err := r.c.botMarked(ctx, gh, meta.Number)
	if err != nil {
		return err
	}
	for _, m := range marked {
		if state, ok := endState(m.Marker, meta); ok {
			log.Info().Str("kind", m.Marker.Kind).Msg("result already posted")
			after := hub.WithWriteClass(ctx, hub.WriteAfterResult)
			err := r.c.setState(after, gh, meta.Number, state)
			if !prog.isEnded() { // the bot stopped between the result and its bookkeeping
				last := closingOf(m.Marker.Kind)
				prog.complete(after, last.conclusion, last.title, last.summary, res)
			}
			return err
		}
	}
	ack, _ := markers.Last(marked, markers.KindAck, meta.TaskID)
	rc := &runContext{meta: meta, gh: gh, issue: cmp.Or(ack.Marker.Issue, meta.Number), round: ack.Marker.Round, branch: ack.Marker.Branch, marked: marked}
	if res != nil && meta.Mode == dispatch.ModePlan {
		// Of the plan as the runner wrote it, before it is made safe to
		// post: the digest the session archive carries.
		rc.planDigest = agentsession.PlanDigest(res.Plan)
	}
	res = r.keep.vetResult(rc, res)
	defer r.keep.keepReceipt(ctx, rc, res)
	// An abort is remembered in memory and in the /abort reply's marker, so
	// a bot restarted between /abort and the run's end does not continue it.
	by, aborted := r.abortedBy(meta.TaskID)
	if !aborted {
		_, aborted = markers.Last(marked, markers.KindAbortRequested, meta.TaskID)
	}
	c := lifecycle.DecideEnd(meta.Mode, lifecycle.EndOf(statusOf(res), aborted), lifecycle.Facts{
		AttemptsLeft: meta.Attempt <= r.c.MaxContinues,
		NoCommits:    res == nil || res.Branch == "" || len(res.Commits) == 0,
	})
	log.Info().Str("end", string(lifecycle.EndOf(statusOf(res), aborted))).Str("do", string(c.Do)).Msg("run ended")
	if c.Do == lifecycle.Resume {
		return r.post.continueRun(ctx, rc, res, prog)
	}
	return r.post.report(ctx, rc, res, prog, c, by)
}

// endState is the state a result marker of the run shows, if m is one.
func endState(m markers.Marker, meta dispatch.Meta) (lifecycle.State, bool) {
	if m.TaskID != meta.TaskID {
		return "", false
	}
	switch m.Kind {
	case markers.KindPlan:
		return lifecycle.PlanPosted, true
	case markers.KindResult:
		return lifecycle.Done, true
	case markers.KindFailure:
		return lifecycle.Failed, true
	case markers.KindAborted:
		return lifecycle.Aborted, true
	}
	return "", false
}

// report posts the run's result, then shows its state and completes its
// check run and progress comment: the result is written first, ahead of
// the installation's other writes (WriteResult), and the label follows it
// (WriteAfterResult), so a label never says what the issue does not show
// yet. All of it is written under the lock the run still holds.
func (rp *resultPoster) report(ctx context.Context, rc *runContext, res *dispatch.Result, prog *progress, c lifecycle.Case, by string) error {
	if rc.meta.Mode == dispatch.ModeReview || rc.meta.Mode == dispatch.ModeFix || rc.meta.Mode == dispatch.ModeSuggest {
		c.Next = rp.reviewState(ctx, rc, c.Next)
	}
	var post func(context.Context) error
	var last closing
	switch c.Do {
	case lifecycle.PostAborted:
		last = closing{"cancelled", "Aborted", "The run was aborted."}
		post = func(ctx context.Context) error {
			return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/aborted", AbortedData{
				Receipt: rc.receipt(res), By: by,
				Marker: markers.Marker{Kind: markers.KindAborted, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue, Branch: rc.branch}.String(),
			})
		}
	case lifecycle.PostFailure:
		post, last = rp.fail(rc, res, prog)
	case lifecycle.PostPlan:
		post, last = rp.postPlan(rc, res)
	case lifecycle.NoChanges:
		last = closing{"neutral", "No changes", "The agent finished without changing anything."}
		rcpt := rc.receipt(res)
		post = func(ctx context.Context) error {
			return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/no_changes", NoChangesData{Receipt: rcpt, Marker: rcpt.marker(markers.KindResult)})
		}
	case lifecycle.OpenPR:
		return rp.openPR(ctx, rc, res, prog, c.Next)
	case lifecycle.PostTask:
		return rp.postTaskResult(ctx, rc, res, prog, c.Next)
	case lifecycle.PostReview:
		last = closing{"success", "Review posted", ""}
		post = func(ctx context.Context) error { return rp.postReview(ctx, rc, res) }
	case lifecycle.PostFixed:
		last = closing{"success", "Fixed", strings.TrimSpace(res.PRSummary)}
		post = func(ctx context.Context) error { return rp.postFixed(ctx, rc, res) }
	default: // PostDone: a receipt comment where the run was asked for
		last = closing{"success", "Done", res.PRSummary}
		rcpt := rc.receipt(res)
		post = func(ctx context.Context) error {
			return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/done", DoneData{Receipt: rcpt, Marker: rcpt.marker(markers.KindResult)})
		}
	}
	return rp.show(ctx, rc, res, prog, c.Next, last, post)
}

// afterResultWait bounds each step that follows a posted result when the
// bot is stopping (Runs.Stop waits for them).
const afterResultWait = 2 * time.Minute

// closing is the last state of a run's check run and progress comment.
type closing struct{ conclusion, title, summary string }

// closingOf is the last state that a result marker of kind stands for: a
// result found posted (before a restart) whose progress was not closed.
func closingOf(kind string) closing {
	switch kind {
	case markers.KindPlan:
		return closing{"success", "Plan ready", "The plan is posted on the issue."}
	case markers.KindFailure:
		return closing{"failure", "Run failed", ""}
	case markers.KindAborted:
		return closing{"cancelled", "Aborted", "The run was aborted."}
	}
	return closing{"success", "Done", ""}
}

// show posts the result, then writes the state's label, what else follows
// the result (also), and the progress's last state. A label GitHub would
// not take (after setState's tries) does not undo the result: when GitHub
// may take it later, it is returned and the result's retry (which finds
// the result posted) shows the state again; otherwise it stays reported in
// the log, and a restart shows it again.
func (rp *resultPoster) show(ctx context.Context, rc *runContext, res *dispatch.Result, prog *progress, state lifecycle.State, last closing, post func(context.Context) error, also ...func(context.Context)) error {
	if err := post(hub.WithWriteClass(ctx, hub.WriteResult)); err != nil {
		return err
	}
	// The result is on GitHub: its label and progress follow even if the
	// bot is stopping now, or the issue would keep saying what it no
	// longer is.
	done, cancel := outliving(ctx)
	defer cancel()
	after := hub.WithWriteClass(done, hub.WriteAfterResult)
	labelErr := rp.c.setState(after, rc.gh, rc.meta.Number, state)
	for _, f := range also {
		f(after)
	}
	prog.complete(after, last.conclusion, last.title, last.summary, res)
	if transientGitHubError(labelErr) {
		return labelErr
	}
	return nil
}

// runContext is what finishing a run needs to know about where it came from.
type runContext struct {
	meta   dispatch.Meta
	gh     hub.GitHub
	issue  int
	round  int
	branch string
	marked []markers.Comment
	// planDigest binds a plan run's session to the plan it wrote.
	planDigest string
	// attempts is the PR body's table of attempts (attempts.go), "" for
	// a run that is one of one.
	attempts string
}

// receipt is what the run did and where it came from.
func (rc *runContext) receipt(res *dispatch.Result) Receipt {
	branch := rc.branch
	if res != nil && res.Branch != "" {
		branch = res.Branch
	}
	r := Receipt{
		TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Repo: rc.meta.Repo, Issue: rc.issue, Number: rc.meta.Number,
		Branch: branch, Attempt: rc.meta.Attempt, Round: rc.round, Result: res,
	}
	if ack, ok := markers.Last(rc.marked, markers.KindAck, rc.meta.TaskID); ok {
		r.CIChecks = ack.Marker.CIChecks
	}
	return r
}

// mediaBase is the permanent URL prefix of media committed by the run: the
// raw file at the media commit, so links survive later pushes.
func (rp *resultPoster) mediaBase(rc *runContext, res *dispatch.Result) string {
	if res == nil || res.MediaCommit == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/raw/%s/", strings.TrimSuffix(rp.c.WebURL, "/"), rc.meta.Repo, res.MediaCommit)
}

func (rp *resultPoster) postPlan(rc *runContext, res *dispatch.Result) (func(context.Context) error, closing) {
	data := PlanCommentData{
		Receipt: rc.receipt(res), MaxRounds: rp.c.MaxPlanRounds, CostSoFar: rp.costSoFar(rc, res), PlanStart: markers.PlanStart, PlanEnd: markers.PlanEnd,
	}
	data.Round = max(rc.round, 1)
	if ack, ok := markers.Last(rc.marked, markers.KindAck, rc.meta.TaskID); ok {
		data.Images = ack.Marker.Images
	}
	if res != nil && res.Images != nil {
		data.ImagesNote = res.Images.Note
	}
	data.Marker = markers.Marker{Kind: markers.KindPlan, TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Issue: rc.issue, Round: data.Round, Cost: roundCost(res), PlanSHA: rc.planDigest, Files: res.PlanFiles}.String()
	return func(ctx context.Context) error {
		return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/plan_comment", data)
	}, closingOf(markers.KindPlan)
}

// costSoFar adds up the costs of this issue's earlier plan rounds.
func (rp *resultPoster) costSoFar(rc *runContext, res *dispatch.Result) float64 {
	total := 0.0
	if res != nil {
		total = res.TokenUsage.TotalCostUSD
	}
	for _, m := range rc.marked {
		if m.Marker.Kind == markers.KindPlan {
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

// fail is the post of a run's failure comment, and its check run's last
// state: failed (timed out).
func (rp *resultPoster) fail(rc *runContext, res *dispatch.Result, prog *progress) (func(context.Context) error, closing) {
	rcpt := rc.receipt(res)
	data := FailureData{Receipt: rcpt, Marker: rcpt.marker(markers.KindFailure), Retry: "/retry"}
	prog.attach(headOf(res))
	conclusion := "failure"
	if res != nil && res.Status == dispatch.StatusTimeout {
		conclusion = "timed_out"
	}
	return func(ctx context.Context) error { return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/failure", data) },
		closing{conclusion, "Run " + string(statusOf(res)), errorMessage(res)}
}

// continueRun resumes an interrupted run (the table checked it may): the
// code-writing ones in continue mode on their branch, the others afresh.
// The issue's lock passes from the interrupted run to its continuation.
func (rp *resultPoster) continueRun(ctx context.Context, rc *runContext, res *dispatch.Result, prog *progress) error {
	prog.complete(ctx, "neutral", "Interrupted; continuing", "The sandbox stopped before the run finished; a continue run picks up the pushed work.", res)
	repo, err := rc.gh.Repository(ctx)
	if err != nil {
		return err
	}
	mode := dispatch.ModeContinue
	if lifecycle.KindOf(rc.meta.Mode).StartsOver {
		mode = rc.meta.Mode
	}
	branch := rc.branch
	if res != nil && res.Branch != "" {
		branch = res.Branch
	}
	req := startRequest{
		InstallationID: rc.meta.InstallationID, Repo: repo, Number: rc.meta.Number, Issue: rc.issue,
		IsPR: rc.meta.Number != rc.issue, Mode: mode, Trigger: fmt.Sprintf("%s-continue-%d", rc.meta.TaskID, rc.meta.Attempt),
		DeliveryID: rc.meta.DeliveryID, Attempt: rc.meta.Attempt + 1, Branch: branch, Round: rc.round,
		// A fix starts again from the commit it was asked on, and answers
		// in the same thread.
		Head: rc.meta.HeadSHA,
	}
	if ack, ok := markers.Last(rc.marked, markers.KindAck, rc.meta.TaskID); ok && (mode == dispatch.ModeFix || mode == dispatch.ModeSuggest) {
		req.Inline = ack.Marker.Inline
	}
	if plan, ok := markers.Last(rc.marked, markers.KindPlan, ""); ok {
		req.Plan = markers.PlanText(plan.Comment.GetBody())
	}
	if err := rp.c.Backend.Unlock(ctx, dispatch.LockKey(rc.meta.Repo, rc.meta.Number), rc.meta.TaskID); err != nil {
		return fmt.Errorf("release lock for continue run: %w", err)
	}
	return rp.starts.start(ctx, rc.gh, req)
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
