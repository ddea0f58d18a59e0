package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// The one way a run starts. Every kind of run (plan, execute, revise,
// rebase, continue, task, retry, CI fix and preview) goes through begin:
// the redelivery check, the lock, the server's caps, the submission, the
// announcement and the follower, in that order. What differs between kinds
// is declared, not written twice: a startPolicy (data) says which lock a
// run holds and what a taken lock, full caps and a failed submission do;
// a runKind writes the run's spec and its replies.

// whenFull is what a start does when the server's caps are full.
type whenFull int

const (
	// queueWhenFull: the run waits in the queue for its slot (queue.go).
	queueWhenFull whenFull = iota
	// refuseWhenFull: the run is refused and waits in no queue.
	refuseWhenFull
)

// startPolicy is what a kind of run declares about its start.
type startPolicy struct {
	// lockKey names the lock a run of the kind holds while it lives.
	lockKey func(repo string, number int) string
	// whenFull is what a start over the server's caps does.
	whenFull whenFull
	// waitForEnded: a lock held by a run whose result is on GitHub already
	// is waited for (lockWait) before the kind's busy reply; otherwise the
	// lock gets one try.
	waitForEnded bool
	// submitTries is how often a submission that failed for a passing
	// reason is tried (within DispatchDeadline) before the kind's failure
	// reply.
	submitTries int
	// announceExisting: a submission that finds its run there already is
	// announced all the same (a preview whose comment is not on the pull
	// request yet); otherwise it is a redelivery and nothing is said.
	announceExisting bool
}

// policyOf is the start policy of a run of mode. A run aside (its kind's
// Aside: a preview) holds a lock of its own (never the PR's, so it keeps
// no revise or rebase waiting), is refused rather than queued when the
// caps are full, and gets one try at the lock and one at the submission,
// each refused with a reply; every other run queues, waits a moment for a
// run that has just ended, and retries a submission that failed for a
// passing reason.
func policyOf(mode dispatch.Mode) startPolicy {
	if lifecycle.KindOf(mode).Aside {
		return startPolicy{lockKey: previewLockKey, whenFull: refuseWhenFull, submitTries: 1, announceExisting: true}
	}
	return startPolicy{lockKey: dispatch.LockKey, whenFull: queueWhenFull, waitForEnded: true, submitTries: dispatchTries}
}

// runKind writes what is a kind's own in a start: the run's spec and the
// replies. begin calls it; it takes no lock and submits nothing.
type runKind interface {
	// build reads what the run needs and writes its spec (under the lock).
	build(ctx context.Context, gh hub.GitHub, l launch) (built, error)
	// announce tells the issue or pull request that the run started; the
	// run is followed after it.
	announce(ctx context.Context, gh hub.GitHub, l launch, r built) error
	// busy answers a start whose lock another run (holder) holds.
	busy(ctx context.Context, gh hub.GitHub, l launch, holder string) error
	// failed answers a start that failed; locked says the start holds the
	// run's lock (which it lets go after).
	failed(ctx context.Context, gh hub.GitHub, l launch, err error, locked bool) error
}

// launch is a start request resolved: the configuration, the mode it
// runs in, its task id, its lock, its kind and that kind's policy.
type launch struct {
	req     startRequest
	cfg     sandboxcfg.Resolved
	mode    dispatch.Mode
	base    string
	taskID  string
	lockKey string
	kind    runKind
	policy  startPolicy
	// marked are the bot's marked comments on the thread when the caller
	// read them already (haveMarked); begin reads them otherwise.
	marked     []markers.Comment
	haveMarked bool
	// requestedAt is when the worker took the event (or a queued run got
	// its slot): the receipt's time to the agent's first step counts from
	// it.
	requestedAt time.Time
}

// newLaunch is the launch of req as a run of mode with taskID, under the
// mode's policy.
func newLaunch(req startRequest, mode dispatch.Mode, taskID string, kind runKind) launch {
	p := policyOf(mode)
	return launch{req: req, mode: mode, taskID: taskID, kind: kind, policy: p, lockKey: p.lockKey(req.Repo.GetFullName(), req.Number)}
}

// errCapsFull is a start refused because the server's caps are full.
var errCapsFull = errors.New("every slot for runs is taken")

// submitError is a submission the backend refused, after its tries.
type submitError struct {
	mode   dispatch.Mode
	taskID string
	err    error
}

func (e *submitError) Error() string {
	return fmt.Sprintf("submit %s run %s: %v", e.mode, e.taskID, e.err)
}

func (e *submitError) Unwrap() error { return e.err }

// begin starts the resolved run l: unless its trigger was acted on, it
// takes the run's lock, goes through the caps, reserves its budget (a
// run over the month's budget is refused there), has the kind build the
// spec, submits it, announces it and follows it. Every failure is the
// kind's to answer (kind.failed); a submitted or queued run keeps the
// lock, any other lets it go.
func (s *starter) begin(ctx context.Context, gh hub.GitHub, l launch) error {
	if acted, err := s.actedOn(ctx, gh, l); err != nil || acted {
		if err != nil {
			return l.kind.failed(ctx, gh, l, err, false)
		}
		zerolog.Ctx(ctx).Info().Str("task_id", l.taskID).Msg("task already acted on (its marker is on GitHub): redelivered event, nothing to do")
		return nil
	}
	ctx, log := withTask(ctx, l.taskID)
	if holder, err := s.takeLock(ctx, gh, l); err != nil {
		if errors.Is(err, dispatch.ErrLocked) {
			log.Info().Str("holder", holder).Msg("issue busy; not starting a second run")
			return l.kind.busy(ctx, gh, l, holder)
		}
		return l.kind.failed(ctx, gh, l, fmt.Errorf("lock %s: %w", l.lockKey, err), false)
	}
	keep, saved := false, false // the lock: a queued or submitted run keeps it
	defer func() {
		// A start the bot's stop cut short keeps what the queue saved of
		// it (its slot, its request, its lock): the next bot to start
		// resumes it. Any other start that did not submit lets go.
		if !keep && !(saved && ctx.Err() != nil) {
			s.release(ctx, l)
		}
	}()
	wait, err := s.capsGate(ctx, gh, l)
	if wait {
		keep = true
		return err
	}
	saved = err == nil && l.queued(s.c.Caps)
	var grant budget.Grant
	if err == nil {
		grant, _, err = reserveBudget(ctx, s.c, l)
		// An attempt over the budget is one that could not start: its
		// approval goes on with the others (attempts.go).
		if over, ok := asOverBudget(err); ok && l.req.Variant == 0 {
			return refuseOverBudget(ctx, s.c, gh, l, over)
		}
	}
	var r built
	if err == nil {
		r, err = l.kind.build(ctx, gh, l)
		grantBudget(&r.spec, grant)
	}
	if err == nil {
		var created bool
		created, err = s.submit(ctx, r.spec, l.policy.submitTries)
		if r.spec.Token != "" {
			s.runs.Handed(ctx, l.taskID, r.spec.Token, created, err)
		}
		if err == nil {
			keep = true
			// On the backend: its queue entry holds the slot until it
			// ends, and its saved request is done with (a stop before
			// this leaves it, which the next start drops: resumeClaimed).
			if saved {
				if err := s.c.Backend.DropQueued(ctx, l.taskID); err != nil {
					log.Warn().Err(err).Msg("drop the submitted run's queued request")
				}
			}
			return s.announce(ctx, gh, l, r, created)
		}
		err = &submitError{mode: l.mode, taskID: l.taskID, err: err}
	}
	return l.kind.failed(ctx, gh, l, err, true)
}

// queued reports whether l went through the queue, which saved its
// request and holds its slot: caps are set, or the queue started it.
func (l launch) queued(caps dispatch.Caps) bool {
	return l.policy.whenFull == queueWhenFull && (caps.Any() || l.req.queuedAs != "")
}

// release lets go of the lock of a run that did not start, of the queue
// slot and request it may have, and of its budget reservation.
func (s *starter) release(ctx context.Context, l launch) {
	ctx = context.WithoutCancel(ctx)
	if err := s.c.Backend.Unlock(ctx, l.lockKey, l.taskID); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("release lock after failed start")
	}
	if l.queued(s.c.Caps) {
		if err := s.c.Backend.DropQueued(ctx, l.taskID); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("drop the queued request of a run that did not start")
		}
	}
	if l.policy.whenFull == queueWhenFull {
		s.freeSlot(ctx, l.taskID)
	}
	releaseBudget(ctx, s.c, l.taskID)
}

// capsGate puts the run through the server's caps as its policy says:
// the queue (wait=true: it waits there), or a refusal when they are full.
func (s *starter) capsGate(ctx context.Context, gh hub.GitHub, l launch) (wait bool, err error) {
	if l.policy.whenFull == queueWhenFull {
		return s.queueGate(ctx, gh, l.req, l.taskID, l.mode)
	}
	full, err := s.capsFull(ctx, l.req)
	if err == nil && full {
		err = errCapsFull
	}
	return false, err
}

// capsFull reports whether a new run would be over the server's caps,
// counting every run the backend has not seen end.
func (s *starter) capsFull(ctx context.Context, req startRequest) (bool, error) {
	if !s.c.Caps.Any() {
		return false, nil
	}
	live, err := dispatch.LiveRuns(ctx, s.c.Backend)
	if err != nil {
		return false, err
	}
	total, inst, repo := len(live), 0, 0
	for _, m := range live {
		if m.InstallationID == req.InstallationID {
			inst++
		}
		if strings.EqualFold(m.Repo, req.Repo.GetFullName()) {
			repo++
		}
	}
	return !s.c.Caps.Fits(total, inst, repo), nil
}

// announce has the kind announce a submitted run, then follows it. A
// submission that found the run there already is a redelivery, announced
// again only where the kind's policy says so.
func (s *starter) announce(ctx context.Context, gh hub.GitHub, l launch, r built, created bool) error {
	if !created && !l.policy.announceExisting {
		zerolog.Ctx(ctx).Info().Msg("run exists already (redelivered event); nothing to do")
		return nil
	}
	err := l.kind.announce(ctx, gh, l, r)
	s.runs.Follow(r.spec.Meta)
	return err
}

// lockWait bounds how long a start waits for the lock of a run whose
// result is posted: its follower lets go once its bookkeeping is done.
const lockWait = 10 * time.Second

// takeLock takes the run's lock for l. Where its policy says so, a run
// that holds it but whose result is on the issue already (a person
// answered the plan the moment it appeared) is waited for, lockWait at
// most, instead of answered busy.
func (s *starter) takeLock(ctx context.Context, gh hub.GitHub, l launch) (string, error) {
	deadline := s.c.Now().Add(lockWait)
	for checked := false; ; checked = true {
		holder, err := s.c.Backend.Lock(ctx, l.lockKey, l.taskID)
		if !errors.Is(err, dispatch.ErrLocked) || !l.policy.waitForEnded || s.c.Now().After(deadline) {
			return holder, err
		}
		if !checked {
			marked, merr := s.c.botMarked(ctx, gh, l.req.Number)
			if merr != nil || !ended(marked, holder) && !(l.req.IsPR && reviewEnded(ctx, s.c, gh, l.req.Number, holder)) {
				return holder, err
			}
			zerolog.Ctx(ctx).Info().Str("holder", holder).Msg("the run holding the issue has ended; waiting for its follower to let go")
		}
		if !pause(ctx, 50*time.Millisecond) {
			return holder, err
		}
	}
}

// reviewEnded reports whether run taskID's result is on pull request
// number as the App's review: a review run posts its result so, not as a
// comment, and a /fix asked the moment the review appeared waits for it as
// an /approve waits for its plan's run.
func reviewEnded(ctx context.Context, c *core, gh hub.GitHub, number int, taskID string) bool {
	login, err := c.LoadIdentity(ctx)
	if err != nil {
		return false
	}
	reviews, err := gh.Reviews(ctx, number)
	if err != nil {
		return false
	}
	for _, rv := range markers.Reviews(reviews, login) {
		if rv.Marker.TaskID == taskID && rv.Marker.Kind == markers.KindResult {
			return true
		}
	}
	return false
}

// submit submits the run, trying a submission that failed for a passing
// reason (engine or Nomad unreachable) again with backoff, up to tries
// times within the dispatch deadline. Submit is idempotent by task id, so
// a try that did reach the backend is harmless. It is a method rather than
// a wrapper of the Backend, which would hide the backend's optional
// interfaces (dispatch.TokenReader).
func (s *starter) submit(ctx context.Context, spec dispatch.RunSpec, tries int) (bool, error) {
	start := time.Now()
	wait := s.c.DispatchDeadline / (1<<dispatchTries - 2) // 30s: tries at 0, 5s, 15s
	for try := 1; ; try++ {
		created, err := s.c.Backend.Submit(ctx, spec)
		if err == nil || !dispatch.Transient(err) || try >= tries || time.Since(start)+wait > s.c.DispatchDeadline {
			return created, err
		}
		zerolog.Ctx(ctx).Warn().Err(err).Int("try", try).Dur("retry_in", wait).Msg("submission failed; retrying")
		if !pause(ctx, wait) {
			return false, err
		}
		wait *= 2
	}
}

// mintToken creates an installation token for one repository with the
// contents permission of mode only (follow.TokenPermission). Everything
// else (comments, PRs, checks) the bot does itself.
func (c *core) mintToken(ctx context.Context, installationID int64, repo string, mode dispatch.Mode) (string, time.Time, error) {
	return c.Hub.MintToken(ctx, installationID, repo, follow.TokenPermission(mode))
}
