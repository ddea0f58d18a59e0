package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// runEnds is the engine's side of a followed run's end (follow.Ender):
// it frees the run's queue slot, reads and settles its result, and hands
// it to the resultPoster (the plan comment, PR, or failure comment, and
// automatic continue runs after an interruption) and the resultKeeper
// (receipt, session, artifacts); an attempt's end goes to its approval's
// set (attempts.go), a preview's to its comment.
type runEnds struct {
	c *core
	// slots frees an ended run's queue slot and admits what waits
	// (queue.go).
	slots *starter
	post  *resultPoster
	keep  *resultKeeper
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
	// runs opens the progress of a run the poster starts showing (the PR
	// of an approval's winning attempt).
	runs *follow.Runs
}

// resultKeeper keeps what outlives a run and vets what the run says of
// itself: its receipt and transcript, its agent session, its artifacts,
// and the branch its result names.
type resultKeeper struct {
	c *core
	// runs say who aborted a run, if anyone did.
	runs *follow.Runs
}

// Reconcile follows every run the backend knows, so runs that ended while
// the bot was down get their results posted, resumes the queued runs a
// stopped bot claimed and did not submit, admits what waits (queue.go),
// and waits for the review batches pending in it (batch.go). Safe to call
// more than once.
func (b *Base) Reconcile(ctx context.Context) error {
	runs, err := b.c.Backend.List(ctx)
	if err != nil {
		return fmt.Errorf("list runs on %s backend: %w", b.c.Backend.Name(), err)
	}
	for _, st := range runs {
		place := lifecycle.OnIssue
		if lifecycle.KindOf(st.Meta.Mode).OnPR {
			place = lifecycle.OnPR
		}
		if c, _ := lifecycle.Decide(place, lifecycle.RunState(place, st.Meta.Mode), lifecycle.Restart, lifecycle.Facts{}); c.Do == lifecycle.Follow {
			b.Runs.Follow(st.Meta)
		}
	}
	b.c.Logger.Info().Int("runs", len(runs)).Str("backend", b.c.Backend.Name()).Msg("reconciled runs")
	b.starts.resumeClaimed(b.Runs.Context())
	return b.batches.recover(b.c.Logger.WithContext(ctx))
}

// Stop stops the review batches' timers, the queue's claim watch and the
// followers (the runs go on; a restarted bot reconciles them), and waits
// for the followers to return.
func (b *Base) Stop() {
	b.batches.stop()
	b.starts.claims.close()
	b.Runs.Stop()
}

// Transcript starts keeping a run's lines (follow.Ender).
func (e *runEnds) Transcript(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) follow.Transcript {
	return e.keep.transcript(ctx, gh, meta)
}

// Ended posts what an ended run did and lets it go (follow.Ender).
func (e *runEnds) Ended(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, prog *follow.Progress) {
	log := zerolog.Ctx(ctx)
	e.slots.freeSlot(ctx, meta.TaskID)
	res := e.readResult(ctx, meta)
	// Settled before the result is posted: a continue run it starts
	// reserves against the month's spend with this run's cost in it.
	e.keep.settle(ctx, meta, res)
	// A plan's agent session is kept before the plan is posted: the plan
	// invites /approve, and the execute run it starts takes the session
	// from the backend as soon as it holds the issue.
	e.keep.keepSession(ctx, meta, res)
	if meta.Set != "" {
		// One of an approval's attempts: the approval's result waits for
		// every attempt (attempts.go), which cleans them all up.
		e.sets.endAttempt(ctx, gh, meta, res, prog)
		return
	}
	if err := untilPosted(ctx, log, e.c.ResultRetry, func() error { return e.finish(ctx, gh, meta, res, prog) }); err != nil {
		log.Error().Err(err).Msg("post result")
		// Keep the run and the lock: a restart reconciles and tries again.
		return
	}
	log.Info().Msg("result posted")
	after, cancel := outliving(ctx)
	defer cancel()
	e.post.afterPRRun(after, gh, meta, res)
	e.release(after, meta)
	log.Info().Msg("run finished and reported")
}

// readResult is the ended run's result.json as the bot takes it: a
// rejected one becomes a failure saying so, one of another task or one
// that could not be read is none (nil).
func (e *runEnds) readResult(ctx context.Context, meta dispatch.Meta) *dispatch.Result {
	log := zerolog.Ctx(ctx)
	res, err := e.c.Backend.Result(ctx, meta.TaskID)
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
func (e *runEnds) release(ctx context.Context, meta dispatch.Meta) {
	log := zerolog.Ctx(ctx)
	if err := e.c.Backend.Unlock(ctx, dispatch.LockKey(meta.Repo, meta.Number), meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("release lock")
	}
	if err := e.c.Backend.Cleanup(ctx, meta.TaskID); err != nil {
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
func (e *runEnds) finish(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, res *dispatch.Result, prog *follow.Progress) error {
	log := zerolog.Ctx(ctx)
	marked, err := e.c.botMarked(ctx, gh, meta.Number)
	if err != nil {
		return err
	}
	for _, m := range marked {
		if state, ok := endState(m.Marker, meta); ok {
			log.Info().Str("kind", m.Marker.Kind).Msg("result already posted")
			after := hub.WithWriteClass(ctx, hub.WriteAfterResult)
			err := e.c.setState(after, gh, meta.Number, state)
			if !prog.IsEnded() { // the bot stopped between the result and its bookkeeping
				last := closingOf(m.Marker.Kind)
				prog.Complete(after, last.conclusion, last.title, last.summary, res)
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
	res = e.keep.vetResult(rc, res)
	defer e.keep.keepReceipt(ctx, rc, res)
	// An abort is remembered in memory and in the /abort reply's marker, so
	// a bot restarted between /abort and the run's end does not continue it.
	by, aborted := e.keep.runs.AbortedBy(meta.TaskID)
	if !aborted {
		_, aborted = markers.Last(marked, markers.KindAbortRequested, meta.TaskID)
	}
	c := lifecycle.DecideEnd(meta.Mode, lifecycle.EndOf(statusOf(res), aborted), lifecycle.Facts{
		AttemptsLeft: meta.Attempt <= e.c.MaxContinues,
		NoCommits:    res == nil || res.Branch == "" || len(res.Commits) == 0,
	})
	log.Info().Str("end", string(lifecycle.EndOf(statusOf(res), aborted))).Str("do", string(c.Do)).Msg("run ended")
	if c.Do == lifecycle.Resume {
		return e.post.continueRun(ctx, rc, res, prog)
	}
	return e.post.report(ctx, rc, res, prog, c, by)
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
func (rp *resultPoster) report(ctx context.Context, rc *runContext, res *dispatch.Result, prog *follow.Progress, c lifecycle.Case, by string) error {
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
// bot is stopping (the follower's Stop waits for them).
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
func (rp *resultPoster) show(ctx context.Context, rc *runContext, res *dispatch.Result, prog *follow.Progress, state lifecycle.State, last closing, post func(context.Context) error, also ...func(context.Context)) error {
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
	prog.Complete(after, last.conclusion, last.title, last.summary, res)
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
func (rp *resultPoster) fail(rc *runContext, res *dispatch.Result, prog *follow.Progress) (func(context.Context) error, closing) {
	rcpt := rc.receipt(res)
	data := FailureData{Receipt: rcpt, Marker: rcpt.marker(markers.KindFailure), Retry: "/retry"}
	prog.Attach(headOf(res))
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
func (rp *resultPoster) continueRun(ctx context.Context, rc *runContext, res *dispatch.Result, prog *follow.Progress) error {
	prog.Complete(ctx, "neutral", "Interrupted; continuing", "The sandbox stopped before the run finished; a continue run picks up the pushed work.", res)
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
