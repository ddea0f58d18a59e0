package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Review feedback on an agent PR (reviews, inline comments, /revise and
// mentions by writers) is batched: the first piece opens a batch, and the
// revise run starts ReviewBatchWindow later with everything written by
// then (batch_feedback.go), so a reviewer's five comments make one run.
//
// A pending batch is a lock in the backend under batchPrefix, its holder
// the JSON of batchHolder. The lock is what replicas share and what
// outlives a restart: the first replica to create it opens the batch,
// every other trigger joins it (the feedback itself is read from GitHub
// when the batch starts, so joining writes nothing). The batch's task id
// derives from the trigger that opened it, so two replicas starting it
// submit the same task and create-only submission keeps one run. A
// restarted bot lists the batch locks (dispatch.LockLister) and starts
// what is due.
const batchPrefix = "batch/"

func batchKey(repo string, number int) string { return batchPrefix + dispatch.LockKey(repo, number) }

// batchHolder is a pending batch as its lock keeps it: what any replica
// needs to start it.
type batchHolder struct {
	TaskID       string    `json:"task"`
	Due          time.Time `json:"due"`
	Installation int64     `json:"installation"`
	Repo         string    `json:"repo"`
	Number       int       `json:"number"`
	// Trigger is the opening event (review, inline comment or comment id):
	// the run's task id derives from it.
	Trigger  string `json:"trigger"`
	Delivery string `json:"delivery,omitempty"`
	Sender   string `json:"sender,omitempty"`
	// Kind is "" for review feedback, batchCI for failing checks that
	// wait for the run holding the PR (batch_ci.go).
	Kind string `json:"kind,omitempty"`
}

// key is the lock of the pending batch h.
func (h batchHolder) key() string {
	if h.Kind == batchCI {
		return ciWaitKey(h.Repo, h.Number)
	}
	return batchKey(h.Repo, h.Number)
}

// batchTrigger is the task-id trigger of a batch opened by trigger.
func batchTrigger(trigger string) string { return "batch-" + trigger }

// batches are the review-feedback batches (and the pending looks at
// failing checks) this replica knows of, with their timers: the part of a
// PR's life between feedback and the revise run it starts.
type batches struct {
	c      *core
	starts *starter
	// ci reads a PR's checks again once the run holding it ended
	// (batch_ci.go).
	ci     *ciFixer
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	timers map[string]*pendingBatch // lock key -> timer
	wg     sync.WaitGroup
}

type pendingBatch struct {
	timer  *time.Timer
	taskID string
	// waitingOn is the run holding the PR that the batch waits for.
	waitingOn string
}

func newBatches(c *core, starts *starter, ci *ciFixer) *batches {
	ctx, cancel := context.WithCancel(context.Background())
	return &batches{c: c, starts: starts, ci: ci, ctx: ctx, cancel: cancel, timers: map[string]*pendingBatch{}}
}

// add puts a writer's feedback on an agent PR into the PR's batch,
// opening one if none is pending. req is what a direct revise would have
// been started with; the caller checked the sender and the PR.
func (bs *batches) add(ctx context.Context, gh hub.GitHub, req startRequest) error {
	full := req.Repo.GetFullName()
	key := batchKey(full, req.Number)
	h := batchHolder{
		TaskID: dispatch.NewTaskID(full, req.Number, dispatch.ModeRevise, batchTrigger(req.Trigger)),
		Due:    bs.c.Now().Add(bs.c.ReviewBatchWindow).UTC(), Installation: req.InstallationID,
		Repo: full, Number: req.Number, Trigger: req.Trigger, Delivery: req.DeliveryID, Sender: req.Sender,
	}
	if err := bs.enter(ctx, key, h); err != nil {
		return err
	}
	if req.CommentID != 0 {
		bs.c.react(ctx, gh, req.Number, req.CommentID, "eyes")
	}
	return nil
}

// enter opens the batch h, or joins the one pending on the PR.
func (bs *batches) enter(ctx context.Context, key string, h batchHolder) error {
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode review batch of %s: %w", key, err)
	}
	log := zerolog.Ctx(ctx).With().Str("task_id", h.TaskID).Logger()
	cur, err := bs.c.Backend.Lock(ctx, key, string(raw))
	switch {
	case err == nil:
		log.Info().Time("due", h.Due).Msg("review feedback opens a batch; its revise run starts when the window closes")
		bs.schedule(string(raw), h, nil, 0, "")
	case errors.Is(err, dispatch.ErrLocked):
		open, perr := parseBatchHolder(cur)
		if perr != nil {
			return fmt.Errorf("pending review batch of %s: %w", key, perr)
		}
		log.Info().Str("batch", open.TaskID).Msg("review feedback joins the pending batch")
		// The replica that opened the batch starts it; this one stands by
		// in case that replica is gone by then, and in case the batch
		// read its feedback before this piece arrived (rejoin).
		bs.schedule(cur, open, &h, bs.c.ReviewBatchWindow, "")
	default:
		return fmt.Errorf("open review batch %s: %w", key, err)
	}
	return nil
}

func parseBatchHolder(raw string) (batchHolder, error) {
	var h batchHolder
	if err := json.Unmarshal([]byte(raw), &h); err != nil || h.Repo == "" || h.Number == 0 || h.Installation == 0 {
		return h, fmt.Errorf("batch lock holder %q is not a review batch", raw)
	}
	return h, nil
}

// schedule starts the batch at its due time plus extra, unless this
// replica already waits for it. rejoin is the feedback that joined the
// batch, waitingOn the run holding the PR that it waits for.
func (bs *batches) schedule(raw string, h batchHolder, rejoin *batchHolder, extra time.Duration, waitingOn string) {
	key := h.key()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if _, ok := bs.timers[strings.ToLower(key)]; ok || bs.ctx.Err() != nil {
		return
	}
	wait := max(h.Due.Sub(bs.c.Now()), 0) + extra
	bs.wg.Add(1)
	p := &pendingBatch{taskID: h.TaskID, waitingOn: waitingOn}
	p.timer = time.AfterFunc(wait, func() {
		defer bs.wg.Done()
		bs.mu.Lock()
		delete(bs.timers, strings.ToLower(key))
		bs.mu.Unlock()
		bs.fire(key, raw, h, rejoin)
	})
	bs.timers[strings.ToLower(key)] = p
}

// fire starts the batch if it is still pending (another replica may have
// started it), then releases its lock.
func (bs *batches) fire(key, raw string, h batchHolder, rejoin *batchHolder) {
	log := bs.c.Logger.With().Str("task_id", h.TaskID).Str("repo", h.Repo).Int("issue", h.Number).Str("delivery_id", h.Delivery).Logger()
	ctx := log.WithContext(bs.ctx)
	cur, err := bs.c.Backend.Holder(ctx, key)
	if err != nil {
		log.Error().Err(err).Msg("read the review batch's lock; a restart tries again")
		return
	}
	if cur != raw {
		log.Debug().Msg("review batch already started elsewhere")
		if rejoin != nil {
			// The batch this feedback joined may have read the PR just
			// before it arrived: a batch of its own makes sure (it starts
			// nothing if the feedback went along).
			again := *rejoin
			again.Due = bs.c.Now().Add(bs.c.ReviewBatchWindow).UTC()
			if err := bs.enter(ctx, key, again); err != nil {
				log.Error().Err(err).Msg("reopen a review batch for late feedback")
			}
		}
		return
	}
	if holder, busy := bs.prBusy(ctx, h); busy {
		// Feedback given while the agent works on the PR goes into the
		// next run rather than earning a "busy" reply: the batch looks
		// again a window later.
		log.Info().Str("holder", holder).Msg("a run holds the PR; the review batch waits for it")
		bs.schedule(raw, h, nil, bs.c.ReviewBatchWindow, holder)
		return
	}
	gh, err := bs.c.Hub.Repo(h.Installation, h.Repo)
	if err != nil {
		log.Error().Err(err).Msg("start review batch: no installation client")
		return
	}
	start := bs.startBatch
	if h.Kind == batchCI {
		start = bs.recheckCI
	}
	if err := start(ctx, gh, h); err != nil {
		log.Error().Err(err).Str("kind", h.Kind).Msg("start review batch")
	}
	if ctx.Err() != nil {
		return // shutting down: the lock stays, the next start picks it up
	}
	// Released after the run is submitted, so a replica that finds the
	// lock gone knows the run exists (or was refused and answered).
	if err := bs.c.Backend.Unlock(context.WithoutCancel(ctx), key, raw); err != nil {
		log.Warn().Err(err).Msg("release review batch lock")
	}
}

// prBusy tells whether another run holds the PR's lock and is still
// there (running, or ended with its result still being posted). A lock
// whose run is gone is not busy: the start finds it and says so.
func (bs *batches) prBusy(ctx context.Context, h batchHolder) (string, bool) {
	holder, err := bs.c.Backend.Holder(ctx, dispatch.LockKey(h.Repo, h.Number))
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the PR's lock; trying the batch later")
		return "", true
	}
	if holder == "" || holder == h.TaskID {
		return holder, false
	}
	if _, err := bs.c.Backend.Status(ctx, holder); errors.Is(err, dispatch.ErrNotFound) {
		return holder, false
	}
	return holder, true
}

// startBatch starts the revise run of a batch with every piece of
// feedback on the PR not yet addressed; with none (a redelivered event
// whose feedback a run already took) nothing starts.
func (bs *batches) startBatch(ctx context.Context, gh hub.GitHub, h batchHolder) error {
	repo, err := gh.Repository(ctx)
	if err != nil {
		return err
	}
	pr, issue, ok, err := bs.agentPR(ctx, gh, h.Number)
	if err != nil || !ok {
		return err
	}
	fb, upto, err := bs.pendingFeedback(ctx, gh, h.Number)
	if err != nil {
		return err
	}
	if fb.empty() {
		zerolog.Ctx(ctx).Info().Msg("review batch has no feedback left to address; no run")
		return nil
	}
	req := startRequest{
		InstallationID: h.Installation, Repo: repo, Number: h.Number, IsPR: true, Issue: issue,
		Mode: dispatch.ModeRevise, Trigger: batchTrigger(h.Trigger), DeliveryID: h.Delivery, Sender: h.Sender,
		Feedback: fb.text(), Inline: fb.inlineIDs(), Branch: pr.GetHead().GetRef(), BaseBranch: pr.GetBase().GetRef(),
		Flags: fb.flags(), FeedbackUpto: upto, FeedbackImages: fb.images(),
	}
	if req.Flags != (sandboxcfg.Flags{}) {
		req.Command = "revise" // a flag over the server's ceiling is refused as the command's
	}
	return bs.starts.start(ctx, gh, req)
}

// agentPR reads a PR and tells whether this App opened it (markers.IsAgentPR), and
// for which issue.
func (bs *batches) agentPR(ctx context.Context, gh hub.GitHub, number int) (pr *github.PullRequest, issue int, ours bool, err error) {
	login, err := bs.c.LoadIdentity(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	if pr, err = gh.PullRequest(ctx, number); err != nil {
		return nil, 0, false, err
	}
	issue, ours = markers.IsAgentPR(pr, login)
	return pr, issue, ours, nil
}

// recover schedules the batches pending in the backend: after a restart,
// or on a replica that never saw their events.
func (bs *batches) recover(ctx context.Context) error {
	lister, ok := bs.c.Backend.(dispatch.LockLister)
	if !ok {
		return nil
	}
	locks, err := lister.ListLocks(ctx, batchPrefix)
	if err != nil {
		return fmt.Errorf("list pending review batches: %w", err)
	}
	for key, raw := range locks {
		h, err := parseBatchHolder(raw)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("lock", key).Msg("skipping a batch lock")
			continue
		}
		bs.schedule(raw, h, nil, 0, "")
	}
	return nil
}

// pending lists the task ids of batches waiting for their window, for
// Base.Busy: a pending batch is work the bot still has to do, unless it
// waits for a run that is still going (like that run's follower).
func (bs *batches) pending(ctx context.Context) []string {
	bs.mu.Lock()
	waits := map[string]string{}
	for _, p := range bs.timers {
		waits[p.taskID] = p.waitingOn
	}
	bs.mu.Unlock()
	var ids []string
	for id, on := range waits {
		if on != "" {
			if st, err := bs.c.Backend.Status(ctx, on); err == nil && !st.State.Ended() {
				continue
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// stop drops the timers (the locks stay for the next start) and waits for
// batches being started.
func (bs *batches) stop() {
	bs.cancel()
	bs.mu.Lock()
	for k, p := range bs.timers {
		if p.timer.Stop() {
			bs.wg.Done()
		}
		delete(bs.timers, k)
	}
	bs.mu.Unlock()
	bs.wg.Wait()
}
