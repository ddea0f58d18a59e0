package handlers

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// thread is where an event happened and who acted: an issue or pull
// request, through the seam.
type thread struct {
	gh           hub.GitHub
	installation int64
	// repo is the event's repository; push events leave out some fields
	// (starting a run reads it afresh when it needs them).
	repo   *github.Repository
	number int
	isPR   bool
	// pr is the pull request when the event brought it.
	pr         *github.PullRequest
	sender     string
	commentID  int64
	deliveryID string
	// issue is the issue as the event's payload shows it (a label's or a
	// comment's event), for what a writer vouches for (vouch.go).
	issue *github.Issue
}

// pullRequest is the thread's pull request: as the event brought it, or
// read from GitHub when it brought none.
func (t thread) pullRequest(ctx context.Context) (*github.PullRequest, error) {
	if t.pr != nil {
		return t.pr, nil
	}
	return t.gh.PullRequest(ctx, t.number)
}

// scene is an issue or pull request as the bot sees it when an event
// arrives: its place and state in the table, the facts the table's guards
// read, and what they were read from.
type scene struct {
	place lifecycle.Place
	state lifecycle.State
	facts lifecycle.Facts
	// marked are the bot's own marked comments, oldest first.
	marked []markers.Comment
	// holder is the task holding the issue's lock ("" when none).
	holder string
	// plan is the newest plan comment (hasPlan), last the marker of the
	// newest run started or ended (hasLast).
	plan    markers.Comment
	hasPlan bool
	last    markers.Marker
	hasLast bool
	// pr and issue are the App's pull request and the issue it serves.
	pr    *github.PullRequest
	issue int
}

// holderAck is the acknowledgement of the run holding the lock.
func (sc *scene) holderAck() (markers.Comment, bool) {
	if sc.holder == "" {
		return markers.Comment{}, false
	}
	return markers.Last(sc.marked, markers.KindAck, sc.holder)
}

// observe reads the state of t from the table's storage: the bot's own
// markers (which run started and ended, the plan), the per-issue lock
// (which run holds it) and the queue (whether it waits). The state label
// is what the bot wrote from the same; people can edit it, so it is never
// read back.
func (b *Base) observe(ctx context.Context, t thread) (scene, error) {
	sc := scene{place: lifecycle.OnIssue, issue: t.number}
	login, err := b.c.LoadIdentity(ctx)
	if err != nil {
		return sc, err
	}
	if t.isPR {
		sc.place = lifecycle.OnPR
		pr, err := t.pullRequest(ctx)
		if err != nil {
			return sc, err
		}
		issue, ours := markers.IsAgentPR(pr, login)
		if ours {
			sc.pr, sc.issue = pr, issue
		} else {
			sc.state = lifecycle.NotOurs
		}
	}
	comments, err := t.gh.Comments(ctx, t.number)
	if err != nil {
		return sc, err
	}
	sc.marked = markers.Comments(comments, login)
	if sc.holder, err = b.Backend.Holder(ctx, dispatch.LockKey(t.gh.FullName(), t.number)); err != nil {
		return sc, fmt.Errorf("read the lock of %s#%d: %w", t.gh.FullName(), t.number, err)
	}
	if sc.state == lifecycle.NotOurs {
		// Review and fix runs hold another's pull request too: /abort and
		// /status find them; its state stays the same.
		sc.last, sc.hasLast = lastOutcome(sc.marked)
		return sc, nil
	}
	sc.plan, sc.hasPlan = markers.Last(sc.marked, markers.KindPlan, "")
	sc.last, sc.hasLast = lastOutcome(sc.marked)
	sc.state = b.stateOf(ctx, &sc)
	sc.facts = lifecycle.Facts{
		HasPlan: sc.hasPlan, PlanRound: sc.plan.Marker.Round, MaxRounds: b.MaxPlanRounds,
		HasLastRun: sc.hasLast, LastMode: sc.last.Mode, LastBranch: sc.last.Branch,
	}
	return sc, nil
}

// stateOf names the state: a run holding the lock makes it that run's
// (waiting in the queue until its acknowledgement is posted) until its
// result is posted; otherwise the newest outcome the bot's comments tell
// of.
func (b *Base) stateOf(ctx context.Context, sc *scene) lifecycle.State {
	if sc.holder != "" && !ended(sc.marked, sc.holder) {
		if ack, ok := sc.holderAck(); ok {
			return lifecycle.RunState(sc.place, ack.Marker.Mode)
		}
		if _, ok := markers.Last(sc.marked, markers.KindQueued, sc.holder); ok {
			return lifecycle.Queued
		}
		// Between taking the lock and the acknowledgement: the backend
		// knows the run once it is submitted.
		var mode dispatch.Mode
		if st, err := b.Backend.Status(ctx, sc.holder); err == nil {
			mode = st.Meta.Mode
		}
		return lifecycle.RunState(sc.place, mode)
	}
	for i := len(sc.marked) - 1; i >= 0; i-- {
		switch sc.marked[i].Marker.Kind {
		case markers.KindPlan:
			return lifecycle.PlanPosted
		case markers.KindResult:
			if sc.place == lifecycle.OnPR {
				return lifecycle.PROpen
			}
			return lifecycle.Done
		case markers.KindFailure:
			return lifecycle.Failed
		case markers.KindAborted:
			return lifecycle.Aborted
		case markers.KindOverBudget:
			return lifecycle.OverBudget
		}
	}
	if sc.place == lifecycle.OnPR {
		return lifecycle.PROpen
	}
	return lifecycle.Idle
}

// ended reports whether the result of taskID is posted: its follower is
// only finishing its bookkeeping before it lets the issue go.
func ended(marked []markers.Comment, taskID string) bool {
	for _, m := range marked {
		if m.Marker.TaskID == taskID {
			switch m.Marker.Kind {
			case markers.KindPlan, markers.KindResult, markers.KindFailure, markers.KindAborted, markers.KindOverBudget:
				return true
			}
		}
	}
	return false
}

// lastOutcome is the marker of the newest run that ended (or was started)
// here, for /retry and /continue.
func lastOutcome(marked []markers.Comment) (markers.Marker, bool) {
	for i := len(marked) - 1; i >= 0; i-- {
		switch m := marked[i].Marker; m.Kind {
		case markers.KindFailure, markers.KindAborted, markers.KindResult, markers.KindAck, markers.KindPlan, markers.KindOverBudget:
			return m, true
		}
	}
	return markers.Marker{}, false
}

// triggerActed reports whether trigger already started something here: a
// marker of the bot's names a task derived from it. A redelivered webhook
// maps to the same task ids, so whatever the state is now, it does nothing.
func triggerActed(marked []markers.Comment, repo string, number int, trigger string) bool {
	if trigger == "" {
		return false
	}
	ids := map[string]bool{}
	for _, m := range dispatch.Modes {
		ids[dispatch.NewTaskID(repo, number, m, trigger)] = true
	}
	for _, m := range marked {
		if ids[m.Marker.TaskID] {
			return true
		}
	}
	return false
}

// thread opens the seam on an issue or pull request of repo.
func (b *Base) thread(installation int64, repo *github.Repository, number int, isPR bool) (thread, error) {
	gh, err := b.c.Hub.Repo(installation, repo.GetFullName())
	if err != nil {
		return thread{}, err
	}
	return thread{gh: gh, installation: installation, repo: repo, number: number, isPR: isPR}, nil
}

// botMarked lists an issue's or PR's comments and returns the marked ones
// this App wrote.
func (c *core) botMarked(ctx context.Context, gh hub.GitHub, number int) ([]markers.Comment, error) {
	login, err := c.LoadIdentity(ctx)
	if err != nil {
		return nil, err
	}
	comments, err := gh.Comments(ctx, number)
	if err != nil {
		return nil, err
	}
	return markers.Comments(comments, login), nil
}
