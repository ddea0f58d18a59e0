package lifecycle

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// The tables. A row is an event, a column a state; every state of the
// place has a cell in every row (TestEveryCellIsDecided), so there is no
// event the bot answers by accident. What a start does when it cannot
// start (a flag over a ceiling, an invalid .sandbox.yml, a lock taken by
// another replica, a full queue, a failed submission) is the start's
// business, the same from every cell that starts a run: docs/lifecycle.md says
// it under the table.

func do(a Action, next State) Rule { return Rule{{Do: a, Next: next}} }

func reply(name string) Rule { return do(Reply(name), "") }

var (
	nothing = do(Nothing, "")
	busy    = do(Busy, "")
	status  = do(ShowStatus, "")
	help    = do(Help, "")
)

// each is the same rule in every one of states.
func each(r Rule, states ...State) map[State]Rule {
	m := make(map[State]Rule, len(states))
	for _, s := range states {
		m[s] = r
	}
	return m
}

// with is m with the cells of more added (overriding).
func with(m map[State]Rule, more map[State]Rule) map[State]Rule {
	for s, r := range more {
		m[s] = r
	}
	return m
}

// Rules shared by several cells.
var (
	plan = do(StartPlan, Planning)
	// approve: the plan is executed; without one there is nothing to
	// approve.
	approve = Rule{{If: NoPlan, Do: Reply("no_plan")}, {Do: Execute, Next: Executing}}
	// approveOver: a run refused over budget is asked for again: the plan
	// is executed, or without one the plan run starts.
	approveOver = Rule{{If: NoPlan, Do: StartPlan, Next: Planning}, {Do: Execute, Next: Executing}}
	// approveBusy: a run holds the issue.
	approveBusy = Rule{{If: NoPlan, Do: Reply("no_plan")}, {Do: Busy}}
	replan      = Rule{{If: PastLastRound, Do: Reply("max_rounds")}, {Do: Replan, Next: Planning}}
	replanBusy  = Rule{{If: PastLastRound, Do: Reply("max_rounds")}, {Do: Busy}}
	retry       = Rule{{If: NoEarlierRun, Do: Reply("no_earlier_run")}, {If: RetryNoBranch, Do: Reply("nothing_to_continue")}, {Do: RetryRun}}
	retryBusy   = Rule{{If: NoEarlierRun, Do: Reply("no_earlier_run")}, {If: RetryNoBranch, Do: Reply("nothing_to_continue")}, {Do: Busy}}
	cont        = Rule{{If: NoEarlierRun, Do: Reply("no_earlier_run")}, {If: NoBranch, Do: Reply("nothing_to_continue")}, {Do: ContinueRun, Next: Executing}}
	contBusy    = Rule{{If: NoEarlierRun, Do: Reply("no_earlier_run")}, {If: NoBranch, Do: Reply("nothing_to_continue")}, {Do: Busy}}
	// mentionPlan: a mention on a plan awaiting approval revises it; a
	// bare one ("thanks @bot") must not throw the plan away.
	mentionPlan = Rule{{If: NoText, Do: Help}, {If: PastLastRound, Do: Reply("max_rounds")}, {Do: Replan, Next: Planning}}
	feedback    = Rule{{If: NoText, Do: Help}, {Do: Collect}}
	// ciFix: the PR's own checks failed on its head. Not when the
	// repository did not ask, a person pushed that head, or the base
	// fails the same way (then it says so once); after the last attempt
	// it says what still fails, once.
	ciFix = Rule{{If: CIFixOff, Do: Nothing}, {If: PersonPushed, Do: Nothing}, {If: BaseFails, Do: ReportBaseFails},
		{If: FixesUsedUp, Do: GiveUpCI}, {Do: FixCI, Next: Revising}}
	// ciWait: a run holds the PR; the head is looked at again once it
	// ended.
	ciWait = Rule{{If: CIFixOff, Do: Nothing}, {Do: WaitForRun}}
	// review starts a review run of the pull request's head.
	review = do(StartRun(dispatch.ModeReview), "")
	fix    = do(StartRun(dispatch.ModeFix), "")
	// mentionOther: a mention on a pull request the App did not open asks
	// for a review when it says so; otherwise it is answered with what
	// works there.
	mentionOther = Rule{{If: AsksReview, Do: StartRun(dispatch.ModeReview)}, {Do: Reply("mention_other_pr")}}
)

// The issue's states by whether a run holds it.
var (
	issueHeld = []State{Queued, Planning, Executing}
	issueFree = []State{Idle, PlanPosted, Done, Failed, Aborted, OverBudget}
	// ended: the issue's last run ended (or could not start).
	ended  = []State{Done, Failed, Aborted}
	prOurs = []State{PROpen, Queued, Revising, Rebasing, Failed, Aborted, OverBudget}
	prHeld = []State{Queued, Revising, Rebasing}
	prFree = []State{PROpen, Failed, Aborted, OverBudget}
)

// issueTable is what the bot does on an issue.
var issueTable = wrongPlaces(map[Event]map[State]Rule{
	// A label while a run or a plan is there is the App's own or a
	// re-label: it asks for nothing new.
	Label: with(each(plan, Idle, Done, Failed, Aborted, OverBudget), map[State]Rule{
		Queued: busy, Planning: nothing, PlanPosted: nothing, Executing: nothing,
	}),
	Mention: with(each(plan, Idle, Done, Failed, Aborted, OverBudget), with(each(busy, issueHeld...), map[State]Rule{
		PlanPosted: mentionPlan,
	})),
	Plan: with(each(plan, issueFree...), each(busy, issueHeld...)),
	Approve: with(each(approve, ended...), map[State]Rule{
		Idle: reply("no_plan"), Queued: approveBusy, Planning: reply("plan_in_progress"),
		PlanPosted: do(Execute, Executing), Executing: approveBusy, OverBudget: approveOver,
	}),
	Revise: with(each(replan, issueFree...), map[State]Rule{
		Queued: replanBusy, Planning: reply("plan_in_progress"), Executing: replanBusy,
	}),
	Abort: with(each(reply("nothing_to_abort"), issueFree...), map[State]Rule{
		Queued: do(Dequeue, Aborted), Planning: do(Cancel, ""), Executing: do(Cancel, ""),
	}),
	Retry:    with(each(retry, issueFree...), each(retryBusy, issueHeld...)),
	Continue: with(each(cont, issueFree...), each(contBusy, issueHeld...)),
	Status:   each(status, IssueStates...),
	Run:      each(do(StartRoutine, ""), IssueStates...),
	Typo:     each(help, IssueStates...),
	SlotFree: with(each(nothing, IssueStates...), map[State]Rule{Queued: do(StartQueued, "")}),
	Restart: with(each(nothing, IssueStates...), map[State]Rule{
		Queued: do(Admit, ""), Planning: do(Follow, ""), Executing: do(Follow, ""),
	}),
}, OnIssue, Commands)

// prTable is what the bot does on a pull request. Where a command is not
// allowed (on an issue, on a PR the App did not open) its cell is
// wrong_place, from its declaration (Commands).
var prTable = wrongPlaces(map[Event]map[State]Rule{
	Mention: with(each(feedback, prOurs...), map[State]Rule{NotOurs: mentionOther}),
	// A review on another PR is none of the bot's business.
	Review: with(each(do(Collect, ""), prOurs...), map[State]Rule{NotOurs: nothing}),
	Revise: each(do(Collect, ""), prOurs...),
	Rebase: each(do(UpdateBranch, ""), prOurs...),
	Push:   with(each(do(UpdateBranch, ""), prOurs...), map[State]Rule{NotOurs: nothing}),
	// A person who aborted the last run stopped the agent: failing checks
	// do not start it again.
	ChecksFailed: with(with(each(ciFix, PROpen, Failed, OverBudget), each(ciWait, prHeld...)), map[State]Rule{NotOurs: nothing, Aborted: nothing}),
	Abort: with(each(reply("nothing_to_abort"), prFree...), map[State]Rule{
		Queued: do(Dequeue, Aborted), Revising: do(Cancel, ""), Rebasing: do(Cancel, ""),
		// The review or fix run holding another's pull request, if any.
		NotOurs: do(Cancel, ""),
	}),
	Retry:    with(each(do(RetryRun, ""), prFree...), each(busy, prHeld...)),
	Continue: with(each(do(ContinueRun, Revising), prFree...), each(busy, prHeld...)),
	Preview:  each(do(StartPreview, ""), prOurs...),
	// A review on the App's own PR waits for nothing: a run that holds
	// the PR is answered busy.
	AskReview: with(each(review, NotOurs, PROpen, Failed, Aborted, OverBudget), each(busy, prHeld...)),
	Fix:       with(each(fix, NotOurs, PROpen, Failed, Aborted, OverBudget), each(busy, prHeld...)),
	Pick:      with(each(do(PickAttempt, ""), prFree...), each(busy, prHeld...)),
	Status:    each(status, PRStates...),
	Run:       each(do(StartRoutine, ""), PRStates...),
	Typo:      each(help, PRStates...),
	SlotFree:  with(each(nothing, PRStates...), map[State]Rule{Queued: do(StartQueued, "")}),
	Restart: with(each(nothing, PRStates...), map[State]Rule{
		Queued: do(Admit, ""), Revising: do(Follow, ""), Rebasing: do(Follow, ""),
	}),
}, OnPR, Commands)

// runTable is what the bot does when a run ends, by the run's mode. An
// aborted run is never continued; an interrupted one is, a bounded number
// of times (SANDBOX_MAX_CONTINUES): code-writing runs resume their branch
// in a continue run, the others start over.
var runTable = map[dispatch.Mode]map[End]Rule{
	dispatch.ModePlan:     ends(do(PostPlan, PlanPosted), Planning),
	dispatch.ModeExecute:  ends(Rule{{If: NoCommits, Do: NoChanges, Next: Done}, {Do: OpenPR, Next: Done}}, Executing),
	dispatch.ModeContinue: ends(Rule{{If: NoCommits, Do: NoChanges, Next: Done}, {Do: OpenPR, Next: Done}}, Executing),
	dispatch.ModeTask:     ends(do(PostTask, Done), Executing),
	dispatch.ModeRevise:   ends(do(PostDone, PROpen), Revising),
	dispatch.ModeRebase:   ends(do(PostDone, PROpen), Rebasing),
	// A preview ends however it ends; the PR's state is not its to change.
	dispatch.ModePreview: {Completed: do(EndPreview, ""), Broke: do(EndPreview, ""), Interrupted: do(EndPreview, ""), Stopped: do(EndPreview, "")},
	// A review changes no code; on another's pull request it shows no
	// state (resultPoster.report).
	dispatch.ModeReview:  ends(do(PostReview, PROpen), Revising),
	dispatch.ModeFix:     ends(do(PostFixed, PROpen), Revising),
	dispatch.ModeSuggest: ends(do(PostFixed, PROpen), Revising),
}

// ends is a run table row: completed as given, the rest alike.
func ends(completed Rule, resumes State) map[End]Rule {
	return map[End]Rule{
		Completed:   completed,
		Broke:       do(PostFailure, Failed),
		Interrupted: Rule{{If: AttemptsLeft, Do: Resume, Next: resumes}, {Do: PostFailure, Next: Failed}},
		Stopped:     do(PostAborted, Aborted),
	}
}
