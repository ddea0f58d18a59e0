// Package lifecycle is the life of a run on GitHub in one place: the states
// an issue or pull request is in as the bot sees them, the events that move
// it, and the table that says, for every state and event, what the bot does
// and where that leaves the issue.
//
// It decides and does nothing. The handlers parse an event, observe the
// state (from the bot's own markers, the per-issue lock and the run queue),
// ask Decide, and perform the Case it returns; the state label on GitHub is
// the visible projection of the state, written with the marker comment and
// under the issue's lock.
package lifecycle

import (
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Place is where an event happened.
type Place string

// Places. A pull request the App did not open is the PR place in the
// NotOurs state.
const (
	OnIssue Place = "issue"
	OnPR    Place = "pull request"
)

// State is where an issue or pull request stands.
type State string

// The states of an issue.
const (
	// Idle: the bot has not run here.
	Idle State = "idle"
	// Queued: a run waits for a slot under the server's caps (issue or PR).
	Queued State = "queued"
	// Planning: a plan run holds the issue.
	Planning State = "planning"
	// PlanPosted: a plan waits for /approve.
	PlanPosted State = "plan posted"
	// Executing: an execute, continue or task run holds the issue.
	Executing State = "executing"
	// Done: the last run finished: its PR is open, it changed nothing, or
	// the task's result is posted.
	Done State = "done"
	// Failed: the last run failed, or could not start (issue or PR).
	Failed State = "failed"
	// Aborted: a person stopped the last run (issue or PR).
	Aborted State = "aborted"
	// OverBudget: the last run was refused because its budget did not fit
	// what is left of the month (issue or PR); a writer's /approve starts
	// it once the budget was raised or the month turned.
	OverBudget State = "over budget"
)

// The states of a pull request.
const (
	// NotOurs: a pull request this App did not open.
	NotOurs State = "not the App's"
	// PROpen: the App's pull request, no run on it.
	PROpen State = "PR open"
	// Revising: a revise run (or the continue run of one) changes the PR.
	Revising State = "revising"
	// Rebasing: a rebase run brings the PR up to date with its base.
	Rebasing State = "rebasing"
)

// IssueStates and PRStates are the columns of the two tables, in the order
// of a run's life.
var (
	IssueStates = []State{Idle, Queued, Planning, PlanPosted, Executing, Done, Failed, Aborted, OverBudget}
	PRStates    = []State{NotOurs, PROpen, Queued, Revising, Rebasing, Failed, Aborted, OverBudget}
)

// The state labels: the visible part of the state. Idle, Aborted and
// NotOurs carry none.
const (
	LabelQueued           = "agent:queued"
	LabelPlanning         = "agent:planning"
	LabelAwaitingApproval = "agent:awaiting-approval"
	LabelRunning          = "agent:running"
	LabelDone             = "agent:done"
	LabelFailed           = "agent:failed"
	LabelOverBudget       = "agent:over-budget"
)

// Labels are every state label, for removing the others.
var Labels = []string{LabelPlanning, LabelAwaitingApproval, LabelRunning, LabelDone, LabelFailed, LabelQueued, LabelOverBudget}

// Label is the state label s shows on GitHub ("" for none).
func (s State) Label() string {
	switch s {
	case Queued:
		return LabelQueued
	case Planning:
		return LabelPlanning
	case PlanPosted:
		return LabelAwaitingApproval
	case Executing, Revising, Rebasing:
		return LabelRunning
	case Done, PROpen:
		return LabelDone
	case Failed:
		return LabelFailed
	case OverBudget:
		return LabelOverBudget
	}
	return ""
}

// Running reports whether a run holds the issue or PR in s (the lock is
// taken), waiting in the queue included.
func (s State) Running() bool {
	switch s {
	case Queued, Planning, Executing, Revising, Rebasing:
		return true
	}
	return false
}

// Event is what happened.
type Event string

// Events on an issue or pull request: a person's act, parsed by a handler.
const (
	// Label: a writer added the trigger label to an issue.
	Label Event = "label"
	// Mention: a writer's "@App text".
	Mention Event = "@mention"
	// The comment commands are events too (commands.go).
	// Typo: a comment that is almost a command (a typo, a bad flag).
	Typo Event = "bad command"
	// Review: a writer's review or inline comment on a pull request.
	Review Event = "review"
	// Push: a push to the branch a pull request targets.
	Push Event = "push to base"
	// ChecksFailed: the checks on the head of a pull request have all
	// completed (check runs, Actions workflows, commit statuses) and one
	// or more failed.
	ChecksFailed Event = "checks failed"
	// SlotFree: the queue admitted the waiting run.
	SlotFree Event = "slot free"
	// Restart: the bot (re)started and reconciles with the backend.
	Restart Event = "restart"
)

// IssueEvents and PREvents are the rows of the two tables: every command
// (Commands) in both, allowed there or not.
var (
	IssueEvents = rows([]Event{Label, Mention}, Commands, Typo, SlotFree, Restart)
	PREvents    = rows([]Event{Mention, Review, Push, ChecksFailed}, Commands, Typo, SlotFree, Restart)
)

// End is how a run ended.
type End string

// Ends, the columns of the run table.
const (
	// Completed: the receipt says completed.
	Completed End = "completed"
	// Broke: the receipt says failed, timeout, budget_exceeded or hung, or
	// it was refused or names another branch.
	Broke End = "failed"
	// Interrupted: the sandbox stopped before the run finished (receipt
	// interrupted, or none).
	Interrupted End = "interrupted"
	// Stopped: a person aborted it (or the App was uninstalled).
	Stopped End = "aborted"
)

// Ends are the columns of the run table; its rows are RunKinds.
var Ends = []End{Completed, Broke, Interrupted, Stopped}

// EndOf is how a run that left status ended.
func EndOf(status dispatch.Status, aborted bool) End {
	switch {
	case aborted:
		return Stopped
	case status == dispatch.StatusInterrupted:
		return Interrupted
	case status == dispatch.StatusCompleted:
		return Completed
	}
	return Broke
}

// Facts are what the guards of a rule read: the parts of the observed
// state that are not the state itself.
type Facts struct {
	// HasPlan: a plan of the bot's is on the issue; PlanRound is its round.
	HasPlan   bool
	PlanRound int
	// MaxRounds is the server's bound of plan rounds.
	MaxRounds int
	// HasLastRun: the bot's comments tell of a run here (started or
	// ended); LastMode and LastBranch are that run's.
	HasLastRun bool
	LastMode   dispatch.Mode
	LastBranch string
	// NoText: the mention or command carries no text.
	NoText bool
	// AttemptsLeft: an interrupted run may be continued again.
	AttemptsLeft bool
	// NoCommits: a completed run pushed nothing.
	NoCommits bool
	// The failing checks of a pull request's head (ChecksFailed):
	// CIFixOff, the repository does not ask for fix runs (ci.fix);
	// PersonPushed, the head is not the App's own push; BaseFails, every
	// failing check fails on the base branch's head too; FixesUsedUp, the
	// PR had ci.fix_attempts fix runs already.
	CIFixOff, PersonPushed, BaseFails, FixesUsedUp bool
	// AsksReview: a mention's words ask for a review.
	AsksReview bool
}

// Guard is a condition on Facts that picks one case of a rule.
type Guard string

// Guards.
const (
	Always Guard = ""
	// NoPlan: no plan of the bot's is on the issue.
	NoPlan Guard = "no plan"
	// PastLastRound: another plan round would pass the server's bound.
	PastLastRound Guard = "rounds used up"
	// NoEarlierRun: the bot never ran here.
	NoEarlierRun Guard = "never ran"
	// NoBranch: the run to continue pushed no branch, or writes no code.
	NoBranch Guard = "nothing pushed"
	// RetryNoBranch: /retry of a continue run that pushed no branch.
	RetryNoBranch Guard = "a continue that pushed nothing"
	// NoText: a mention with nothing after it.
	NoText Guard = "no text"
	// AttemptsLeft: the interrupted run may be continued again.
	AttemptsLeft Guard = "attempts left"
	// NoCommits: the completed run pushed nothing.
	NoCommits Guard = "no commits"
	// CIFixOff: .sandbox.yml does not set ci.fix.
	CIFixOff Guard = "ci.fix off"
	// PersonPushed: the failing head is not the App's own push.
	PersonPushed Guard = "a person pushed"
	// BaseFails: what fails, fails on the base branch's head too.
	BaseFails Guard = "fails on the base too"
	// FixesUsedUp: the PR had its ci.fix_attempts fix runs.
	FixesUsedUp Guard = "fix runs used up"
	// AsksReview: the mention asks for a review ("review" in its words).
	AsksReview Guard = "asks for a review"
)

// Holds reports whether g holds on f.
func (g Guard) Holds(f Facts) bool {
	switch g {
	case Always:
		return true
	case NoPlan:
		return !f.HasPlan
	case PastLastRound:
		return f.PlanRound+1 > f.MaxRounds
	case NoEarlierRun:
		return !f.HasLastRun
	case NoBranch:
		return f.LastBranch == "" || !f.LastMode.WritesCode()
	case RetryNoBranch:
		return f.LastMode == dispatch.ModeContinue && (f.LastBranch == "" || !f.LastMode.WritesCode())
	case NoText:
		return f.NoText
	case AttemptsLeft:
		return f.AttemptsLeft
	case NoCommits:
		return f.NoCommits
	case CIFixOff:
		return f.CIFixOff
	case PersonPushed:
		return f.PersonPushed
	case BaseFails:
		return f.BaseFails
	case FixesUsedUp:
		return f.FixesUsedUp
	case AsksReview:
		return f.AsksReview
	}
	panic(fmt.Sprintf("lifecycle: unknown guard %q", g))
}

// Action is what the bot does.
type Action string

// Actions on an event.
const (
	Nothing Action = "nothing"
	// Busy replies that the run holding the issue still runs, naming it,
	// and starts nothing.
	Busy Action = "busy"
	// StartPlan starts a plan run (round 1; a label or mention adds the
	// writer's words; execute when .sandbox.yml needs no plan, task in
	// task mode).
	StartPlan Action = "plan run"
	// Replan starts the next plan round with the feedback and the last
	// plan.
	Replan Action = "next plan round"
	// Execute starts an execute run of the posted plan.
	Execute Action = "execute run"
	// RetryRun starts the last run again (on a PR: a revise when there was
	// none; an execute run is continued instead).
	RetryRun Action = "last run again"
	// ContinueRun resumes the last run's branch in a continue run.
	ContinueRun Action = "continue run"
	// Collect puts a writer's feedback into the PR's review batch; its
	// revise run starts when the batch's window closes and no run holds
	// the PR.
	Collect Action = "review batch"
	// UpdateBranch updates the PR with its base through GitHub's API (a
	// merge), and starts a rebase run when that conflicts.
	UpdateBranch Action = "update branch"
	// Cancel stops the run holding the issue (its end posts "aborted"); a
	// lock whose run is gone is released.
	Cancel Action = "cancel"
	// Dequeue takes the waiting run out of the queue and releases the
	// issue.
	Dequeue Action = "dequeue, `queue_aborted`"
	// ShowStatus replies with the run going, or the last one (to anyone;
	// nothing where the bot never ran).
	ShowStatus Action = "status"
	// StartRoutine opens a new issue for the routine /run names, once
	// across replicas, whose plan follows; the issue or PR it was asked
	// on keeps its state.
	StartRoutine Action = "routine's new issue, `routine_started`"
	// Help replies with what is wrong and the commands that apply.
	Help Action = "command help"
	// StartQueued starts the run the queue admitted.
	StartQueued Action = "start it"
	// Follow follows the run again until its end is posted.
	Follow Action = "follow it"
	// Admit admits the waiting run if a slot is free.
	Admit Action = "admit it"
	// StartPreview starts a preview sandbox of the PR's head (a fork's is
	// refused); it holds no lock of the PR, so the PR's state stays.
	StartPreview Action = "preview sandbox, `preview`"
	// PickAttempt moves the PR's branch to another attempt of its
	// approval (/approve --attempts N), updates the receipt's table of
	// attempts and says so.
	PickAttempt Action = "move the branch to attempt k, `picked`"
	// FixCI starts a revise run whose prompt carries the failing checks,
	// their annotations and log tails; its task id derives from the head
	// commit, so one head gets one fix run.
	FixCI Action = "CI fix run"
	// WaitForRun waits for the run holding the PR to end (as a review
	// batch does), then looks at the PR's head again.
	WaitForRun Action = "wait for the run, look again"
	// ReportBaseFails says once that the checks fail on the base branch
	// too, and starts nothing.
	ReportBaseFails Action = "`ci_base_failing`"
	// GiveUpCI says once what still fails and what the fix runs tried.
	GiveUpCI Action = "`ci_gave_up`"
)

// Actions when a run ends.
const (
	PostPlan    Action = "`plan_comment`"
	OpenPR      Action = "open or update the PR, `pr_opened`"
	NoChanges   Action = "`no_changes`"
	PostTask    Action = "store the artifacts, `task_done`"
	PostDone    Action = "`done`"
	PostFailure Action = "`failure`"
	PostAborted Action = "`aborted`"
	Resume      Action = "resume"
	// PostReview posts the review run's review on the pull request: one
	// review, event COMMENT, inline comments on the lines of its diff.
	PostReview Action = "post the review"
	// PostFixed answers the /fix (in its thread) with the commit pushed,
	// or the suggested changes on a fork's pull request.
	PostFixed Action = "answer with the commit"
	// EndPreview edits the preview's comment: it has ended.
	EndPreview Action = "edit `preview`: ended"
)

// Reply is the action of answering with the github/<name> template, and
// nothing else.
func Reply(name string) Action { return Action("reply:" + name) }

// ReplyName is the template a Reply action posts, if a is one.
func (a Action) ReplyName() (string, bool) {
	if len(a) > len("reply:") && a[:len("reply:")] == "reply:" {
		return string(a[len("reply:"):]), true
	}
	return "", false
}

// StartRun is the action of starting a fresh run of mode: the plan, if
// the issue has one, and the pull request's branch, on a PR, go with it.
// The kinds the bot had before it have actions of their own (StartPlan,
// Execute, ...), which carry more; a new kind's row needs none.
func StartRun(mode dispatch.Mode) Action { return Action("start a " + string(mode) + " run") }

// StartsMode is the mode a StartRun action starts, if a is one.
func (a Action) StartsMode() (dispatch.Mode, bool) {
	rest, ok := strings.CutPrefix(string(a), "start a ")
	if mode, run := strings.CutSuffix(rest, " run"); ok && run && mode != "" {
		return dispatch.Mode(mode), true
	}
	return "", false
}

// Starts reports whether a starts a run.
func (a Action) Starts() bool {
	if _, ok := a.StartsMode(); ok {
		return true
	}
	switch a {
	case StartPlan, Replan, Execute, RetryRun, ContinueRun, StartQueued, Resume, FixCI:
		return true
	}
	return false
}

// Case is one outcome of a rule: when If holds, do Do, after which the
// issue is in Next. Next is "" when the state does not change, and for
// RetryRun and StartQueued the state of the run that starts.
type Case struct {
	If   Guard
	Do   Action
	Next State
}

// Rule is one cell of a table: the first case whose guard holds.
type Rule []Case

// Decide is the case of rule r that holds on f.
func (r Rule) Decide(f Facts) Case {
	for _, c := range r {
		if c.If.Holds(f) {
			return c
		}
	}
	return Case{Do: Nothing}
}

// Decide looks up what the bot does on event e at place p in state s. ok
// is false when the table has no such cell (an event that cannot happen
// there, such as a label on a pull request).
func Decide(p Place, s State, e Event, f Facts) (Case, bool) {
	t := issueTable
	if p == OnPR {
		t = prTable
	}
	r, ok := t[e][s]
	if !ok {
		return Case{Do: Nothing}, false
	}
	return r.Decide(f), true
}

// DecideEnd looks up what the bot does when a run of mode ends as end.
func DecideEnd(mode dispatch.Mode, end End, f Facts) Case {
	r, ok := runTable[mode][end]
	if !ok {
		return Case{Do: PostFailure, Next: Failed}
	}
	return r.Decide(f)
}
