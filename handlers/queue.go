package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Queueing under the server's caps. Every run asked for while a cap is set
// goes through the backend's queue (dispatch.Queue): it is enqueued, then
// admitted in order if a slot is free, else it waits with agent:queued and
// a reply saying its place. A run's slot frees when Runs sees it end; the
// follower then admits the next ones. The queue, the claimed slots and
// what starting each waiting run needs live in the backend, so a restarted
// bot (Reconcile) and a second replica carry on with the same queue; the
// runs that hold slots are counted from the backend's own view of them.

// queuedRequest is what the queue keeps of a startRequest to start it
// later: no token (one is minted at the start) and nothing of the GitHub
// objects but their names.
type queuedRequest struct {
	TaskID     string    `json:"task_id"`
	Repo       string    `json:"repo"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// The start request is stored with its own JSON names; only the
	// repository object is left out (Repo above names it, and starting
	// reads it afresh).
	startRequest
}

func queuedFrom(req startRequest, taskID string, mode dispatch.Mode, at time.Time) queuedRequest {
	req.Mode, req.queuedAs = mode, ""
	return queuedRequest{TaskID: taskID, Repo: req.Repo.GetFullName(), EnqueuedAt: at, startRequest: req}
}

func (q queuedRequest) request(repo *github.Repository) startRequest {
	req := q.startRequest
	req.Repo, req.queuedAs = repo, q.TaskID
	return req
}

// queueGate puts a run that is about to start through the queue when caps
// are set. wait=true means it waits: it is queued, labelled and told its
// place, and keeps the issue's lock. A run the queue itself starts
// (req.queuedAs) has its slot already.
func (s *starter) queueGate(ctx context.Context, gh hub.GitHub, req startRequest, taskID string, mode dispatch.Mode) (wait bool, err error) {
	if !s.c.Caps.Any() || req.queuedAs != "" {
		return false, nil
	}
	log := zerolog.Ctx(ctx)
	now := s.c.Now()
	raw, err := json.Marshal(queuedFrom(req, taskID, mode, now))
	if err != nil {
		return false, fmt.Errorf("queue %s: %w", taskID, err)
	}
	entry := dispatch.QueueEntry{TaskID: taskID, Repo: req.Repo.GetFullName(), Number: req.Number, InstallationID: req.InstallationID, EnqueuedAt: now.UnixMilli()}
	sub, err := dispatch.SubmitQueued(ctx, s.c.Backend, entry, raw, s.c.Caps, now)
	if err != nil {
		return false, err
	}
	others := slices.DeleteFunc(slices.Clone(sub.Admitted), func(e dispatch.QueueEntry) bool { return e.TaskID == taskID })
	s.startQueued(others)
	s.claims.watch(sub.Recheck)
	if sub.Self {
		// It goes now; its request stays saved until it is submitted
		// (begin), so a bot stopped before that resumes it.
		s.observeWait(entry, now)
		return false, nil
	}
	place := sub.Place
	if place == 0 {
		// Admitted by another replica between our admission and our
		// reading of the queue: it starts the run there.
		log.Info().Msg("queued run admitted by another replica")
		return true, nil
	}
	log.Info().Int("place", place).Msg("over a cap: run queued")
	if req.CommentID != 0 {
		s.c.react(ctx, gh, req.Number, req.CommentID, "eyes")
	}
	var labelErr error
	if req.Variant == 0 {
		// An attempt that waits leaves the issue running: its approval is.
		labelErr = s.c.setState(ctx, gh, req.Number, lifecycle.Queued)
	}
	return true, errors.Join(labelErr, s.c.reply(ctx, gh, req.Number, "github/queued", QueuedData{
		TaskID: taskID, Mode: mode, Place: place, Ahead: place - 1, Caps: capsText(s.c.Caps),
		Marker: markers.Marker{Kind: markers.KindQueued, TaskID: taskID, Mode: mode, Issue: req.Issue}.String(),
	}))
}

// capsText describes the caps that are set, for the queued reply.
func capsText(c dispatch.Caps) []string {
	var out []string
	if c.Global > 0 {
		out = append(out, fmt.Sprintf("%d in all", c.Global))
	}
	if c.PerInstallation > 0 {
		out = append(out, fmt.Sprintf("%d per installation", c.PerInstallation))
	}
	if c.PerRepo > 0 {
		out = append(out, fmt.Sprintf("%d per repository", c.PerRepo))
	}
	return out
}

// admit claims the slots free now for the oldest queued runs that fit.
// What holds a slot is read from the backend: every run it has not seen
// end, whichever replica started it. A bot that is stopping claims
// nothing: it could not start what it claimed.
func (s *starter) admit(ctx context.Context) ([]dispatch.QueueEntry, error) {
	if s.runs.Stopping() {
		return nil, nil
	}
	a, err := dispatch.AdmitLive(ctx, s.c.Backend, s.c.Caps, s.c.Now())
	s.claims.watch(a.Recheck)
	return a.Admitted, err
}

func (s *starter) observeWait(e dispatch.QueueEntry, now time.Time) {
	if s.c.QueueWait != nil {
		s.c.QueueWait(max(now.Sub(time.UnixMilli(e.EnqueuedAt)), 0))
	}
}

// admitAndStart admits what fits and starts it; Runs calls it when a run
// ends (its slot is freed first) and after reconciling at start. Without
// caps it still runs: runs queued under caps an operator has since lifted
// must start too, and then they all fit.
func (s *starter) admitAndStart(ctx context.Context) {
	admitted, err := s.admit(ctx)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("admit queued runs; the next run to end tries again")
		return
	}
	s.startQueued(admitted)
}

// freeSlot releases the slot of a run that ended or did not start, and
// admits the next runs.
func (s *starter) freeSlot(ctx context.Context, taskID string) {
	if _, _, err := dispatch.Dequeue(ctx, s.c.Backend, taskID); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("release the run's queue slot; it frees after its grace")
	}
	s.admitAndStart(ctx)
}

// startQueued starts admitted runs one after another, in the order they
// were queued, on a goroutine of their own that Stop waits for and Busy
// counts (follow.Runs.Go).
func (s *starter) startQueued(admitted []dispatch.QueueEntry) {
	if len(admitted) == 0 {
		return
	}
	s.runs.Go(func(ctx context.Context) { startEach(ctx, s, admitted) })
}

// startEach starts admitted runs one after another, in queue order, each
// logged with its task, repository and issue.
func startEach(ctx context.Context, b *starter, admitted []dispatch.QueueEntry) {
	for _, e := range admitted {
		log := zerolog.Ctx(ctx).With().Str("task_id", e.TaskID).Str("repo", e.Repo).Int("issue", e.Number).Logger()
		b.startAdmitted(log.WithContext(ctx), e)
	}
}

// admitLater is the claim watch's admission: on a goroutine the
// follower's Stop waits for and Busy counts, as startQueued's.
func admitLater(b *starter) func() {
	return func() {
		b.runs.Go(func(ctx context.Context) {
			admitted, err := b.admit(ctx)
			if err != nil {
				zerolog.Ctx(ctx).Error().Err(err).Msg("admit queued runs whose claims went stale; the next run to end tries again")
			}
			startEach(ctx, b, admitted)
		})
	}
}

// startAdmitted starts a run the queue admitted. Its entry leaves the
// queue only when its run is on the backend (the entry then holds the
// slot until the run ends) or definitively cannot start: it ran before,
// its request is gone, or its start failed and the issue was told; then
// its slot and its lock are given back at once. A start cut short by the
// bot stopping keeps the claim, the request and the lock: the next start
// of a bot resumes it (resumeClaimed). One that could not be tried
// (GitHub did not answer) keeps its claim too: when the claim's grace
// ends, admission gives it its slot again (claimWatch) and it is tried
// again.
func (s *starter) startAdmitted(ctx context.Context, e dispatch.QueueEntry) {
	log := zerolog.Ctx(ctx)
	s.observeWait(e, s.c.Now())
	tried, err := s.startFromQueue(ctx, e)
	if ctx.Err() != nil {
		log.Info().Msg("stopping while a queued run started: it keeps its slot and its request, and the next bot to start resumes it")
		return
	}
	lost := !tried && errors.Is(err, dispatch.ErrNotFound)
	if !tried && !lost {
		log.Error().Err(err).Dur("retry_after", dispatch.ClaimGrace).Msg("could not start queued run; it is tried again after the claim's grace")
		return
	} else if err != nil {
		log.Error().Err(err).Msg("start queued run")
	}
	if _, serr := s.c.Backend.Status(ctx, e.TaskID); errors.Is(serr, dispatch.ErrNotFound) {
		log.Info().Msg("queued run did not start; its slot goes to the next")
		if lost {
			s.agent.queuedRequestLost(ctx, e, err)
		}
		if err := s.c.Backend.DropQueued(ctx, e.TaskID); err != nil {
			log.Warn().Err(err).Msg("drop queued run")
		}
		s.c.unlock(ctx, dispatch.LockKey(e.Repo, e.Number), e.TaskID)
		s.freeSlot(ctx, e.TaskID)
		return
	}
	if err := s.c.Backend.DropQueued(ctx, e.TaskID); err != nil {
		log.Warn().Err(err).Msg("drop queued run")
	}
}

// resumeClaimed finishes, at the bot's start, what a stopped bot began:
// every claimed run with no sandbox is started (in queue order, before
// anything newly admitted), once; submission is idempotent by task id, so
// one a live replica is submitting at the same moment starts once all the
// same. So is a claimed run on the backend whose saved request is still
// there (the bot stopped between its submission and dropping it, or in
// the middle of its submission, which the docker backend may have left
// as a task directory without a container): its start finds it, or
// completes it, and drops the request. Then admission runs as after any
// run's end.
func (s *starter) resumeClaimed(ctx context.Context) {
	log := zerolog.Ctx(ctx)
	unsubmitted, submitted, err := dispatch.Unsubmitted(ctx, s.c.Backend)
	if err != nil {
		log.Error().Err(err).Msg("read the queue's claimed runs; admission tries again when a claim's grace ends")
	}
	for _, e := range submitted {
		if _, err := s.c.Backend.LoadQueued(ctx, e.TaskID); err == nil {
			unsubmitted = append(unsubmitted, e)
		}
	}
	slices.SortStableFunc(unsubmitted, func(a, b dispatch.QueueEntry) int { return cmp.Compare(a.EnqueuedAt, b.EnqueuedAt) })
	if len(unsubmitted) > 0 {
		log.Info().Int("runs", len(unsubmitted)).Msg("resuming queued runs a stopped bot claimed and did not submit")
	}
	admitted, err := s.admit(ctx)
	if err != nil {
		log.Error().Err(err).Msg("admit queued runs; the next run to end tries again")
	}
	for _, a := range admitted {
		if !slices.ContainsFunc(unsubmitted, func(e dispatch.QueueEntry) bool { return e.TaskID == a.TaskID }) {
			unsubmitted = append(unsubmitted, a)
		}
	}
	s.startQueued(unsubmitted)
}

// startFromQueue loads what starting the run needs and starts it; tried
// is false when it got no further than loading. A request that is gone
// or unreadable is ErrNotFound: there is nothing to start.
func (s *starter) startFromQueue(ctx context.Context, e dispatch.QueueEntry) (tried bool, err error) {
	raw, err := s.c.Backend.LoadQueued(ctx, e.TaskID)
	if err != nil {
		return false, err
	}
	var q queuedRequest
	if err := json.Unmarshal(raw, &q); err != nil {
		return false, fmt.Errorf("queued run %s: %w (%w)", e.TaskID, err, dispatch.ErrNotFound)
	}
	gh, err := s.c.Hub.Repo(q.InstallationID, q.Repo)
	if err != nil {
		return false, fmt.Errorf("queued run %s: installation %d: %w", e.TaskID, q.InstallationID, err)
	}
	repo, err := gh.Repository(ctx)
	if errors.Is(err, hub.ErrNotFound) {
		// Deleted, or the App lost access: nothing to start.
		return false, fmt.Errorf("queued run %s: %w (%w)", e.TaskID, err, dispatch.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("queued run %s: %w", e.TaskID, err)
	}
	req := q.request(repo)
	place := lifecycle.OnIssue
	if req.IsPR {
		place = lifecycle.OnPR
	}
	c, _ := lifecycle.Decide(place, lifecycle.Queued, lifecycle.SlotFree, lifecycle.Facts{})
	if c.Do != lifecycle.StartQueued {
		return true, nil
	}
	return true, s.start(ctx, gh, req)
}
