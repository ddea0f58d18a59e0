package runner

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// pipeline is the shape of work a mode does.
type pipeline int

const (
	pipePlan      pipeline = iota + 1 // read-only agent pass, plan from its text
	pipeImplement                     // agent pass, validation, repairs, media
	pipeRebase                        // rebase onto the base, agent on conflicts
	pipeTask                          // agent in the artifacts directory, no repository
	pipePreview                       // the dev server on the code of the order's archive, for a while
	pipeReview                        // validation of a pull request's head, then a read-only agent pass
)

// startFrom says which remote branch a mode's checkout starts from.
type startFrom int

const (
	startNone   startFrom = iota // no repository (task mode)
	startBase                    // the base branch, checked out under its own name
	startTarget                  // the target branch if it exists, else the base
	startMust                    // the target branch, which must exist
	startSource                  // the archive the bot fetched (preview mode)
	startPRHead                  // a pull request's head, fetched from its refs/pull/N/head
)

// modeSpec is everything that differs between modes: the pipeline reads
// it instead of asking which mode it is in.
type modeSpec struct {
	pipeline pipeline
	// prompt is the template of the main agent pass.
	prompt   string
	readOnly bool
	start    startFrom
	// targetNote is logged when start is startTarget: onExisting when the
	// target branch exists, onMissing when it does not.
	onExisting, onMissing string
	// pushes: the work goes to the target branch (never in plan or task).
	pushes bool
	// pushAtMilestones: every commit is pushed as it is made; a rebase
	// pushes once, at the end, because a half-rebased branch is no state
	// to publish.
	pushAtMilestones bool
	// lease: the push replaces history, so it is forced with a lease on
	// what the remote branch held before.
	lease bool
	// history: the agent is shown the branch's earlier commits.
	history bool
	// mustChange: an agent pass that leaves HEAD where it started failed;
	// otherwise only a branch with nothing beyond the base is a failure.
	mustChange bool
	// commitsFromBase: the receipt lists the commits since the base rather
	// than those of this run.
	commitsFromBase bool
	// subject prefixes the commit message's subject.
	subject string
	// planFromOrder: the receipt carries the approved plan of the order.
	planFromOrder bool
	// resumesPlan: the agent resumes the plan run's session when the work
	// order hands it over (sessioncarry.go).
	resumesPlan bool
	// personsBranch: the branch is a person's pull request's (a fix): it
	// starts where the order says it still is, gets one commit (no
	// checkpoints, no repairs, no media), and is pushed only when the run
	// completed.
	personsBranch bool
	// suggests: the change is not pushed but handed back as a patch
	// (Result.PRPatch) from where the run started.
	suggests bool
}

// modes is the one table of mode behaviour.
var modes = map[dispatch.Mode]modeSpec{
	dispatch.ModePlan: {
		pipeline: pipePlan, prompt: PromptPlan, readOnly: true, start: startBase,
	},
	dispatch.ModeExecute: {
		pipeline: pipeImplement, prompt: PromptExecute, start: startTarget,
		// A rerun of the same task builds on what is there rather than
		// failing on a non-fast-forward push at the end.
		onExisting: "target branch exists already; continuing on it",
		pushes:     true, pushAtMilestones: true, mustChange: true,
		commitsFromBase: true, planFromOrder: true, resumesPlan: true,
	},
	dispatch.ModeContinue: {
		pipeline: pipeImplement, prompt: PromptContinue, start: startTarget,
		onMissing: "nothing was pushed before the interruption; starting from the base branch",
		pushes:    true, pushAtMilestones: true, history: true, subject: "Continue: ",
	},
	dispatch.ModeRevise: {
		pipeline: pipeImplement, prompt: PromptRevise, start: startMust,
		pushes: true, pushAtMilestones: true, history: true, mustChange: true,
		subject: "Address review feedback: ",
	},
	dispatch.ModeRebase: {
		pipeline: pipeRebase, prompt: PromptRebase, start: startMust,
		pushes: true, lease: true, commitsFromBase: true,
	},
	dispatch.ModeTask: {
		pipeline: pipeTask, prompt: PromptTask, start: startNone,
	},
	dispatch.ModePreview: {
		pipeline: pipePreview, start: startSource,
	},
	dispatch.ModeReview: {
		pipeline: pipeReview, prompt: PromptReviewPR, readOnly: true, start: startPRHead,
	},
	dispatch.ModeFix: {
		pipeline: pipeImplement, prompt: PromptFix, start: startMust,
		pushes: true, mustChange: true, subject: "Fix: ", personsBranch: true,
	},
	dispatch.ModeSuggest: {
		pipeline: pipeImplement, prompt: PromptFix, start: startPRHead,
		mustChange: true, subject: "Suggest: ", personsBranch: true, suggests: true,
	},
}
