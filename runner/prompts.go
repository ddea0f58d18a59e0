package runner

import (
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// PromptData is what every prompt template (templates/prompts/*.tmpl) is
// rendered with. Operators overriding a prompt can use any of these fields;
// fields a mode does not use are empty.
type PromptData struct {
	TaskID string
	Mode   dispatch.Mode
	Repo   string // owner/name; empty for a local repository
	Number int    // issue or PR number; 0 when not from GitHub
	Task   dispatch.TaskText
	Plan   string // the approved plan, or the previous plan in a re-plan
	// PlanFiles are the files and areas the approved plan names (execute,
	// continue, revise); StrictPlan is plan.strict.
	PlanFiles    []dispatch.PlanFile
	StrictPlan   bool
	Feedback     string // review feedback (revise) or plan feedback (plan)
	BaseBranch   string
	TargetBranch string
	// WorkDir is the agent's working directory (the checkout, or the
	// artifacts directory in task mode).
	WorkDir string
	Checks  sandboxcfg.Checks
	Skills  []string
	// Services maps service names to the addresses the agent can use.
	Services map[string]string
	// Continuing is true when the prompt continues an agent session that
	// already holds the task (plan revision, repair), so it can be short.
	Continuing bool
	// History is `git log` of the branch (continue, revise).
	History string
	// Failed are the failing checks with their output tails (repair).
	Failed      []FailedCheck
	Attempt     int
	MaxAttempts int
	// Variant and Variants: the run is attempt Variant of Variants that
	// one approval started (execute); 0 when it is the only one.
	Variant, Variants int
	// Conflicts are the unmerged paths (rebase).
	Conflicts []string
	// Rejected are the operations the agent CLI refused (stall).
	Rejected []string
	// Diff is the change under review (review), cut to maxReviewDiff.
	Diff string
	// PR is the pull request a review run reviews, Validation what its
	// checks said on its head (prompts/review_pr).
	PR         *dispatch.PRReview
	Validation []dispatch.CheckResult
	// CI is what a CI fix run fixes: the failing checks (prompts/cifix).
	CI *dispatch.CIReport
	// DevURL is the dev server the agent's browser can open; Recordings
	// the directory its screencasts go to; DevDown why the dev server is
	// not up (prompts/browser).
	DevURL, Recordings, DevDown string
}

// FailedCheck is one failing check as the repair prompt shows it.
type FailedCheck struct {
	Name     string
	Command  string
	Tail     string
	TimedOut bool
}

// Prompt names, as templates.Set knows them.
const (
	PromptPlan     = "prompts/plan"
	PromptExecute  = "prompts/execute"
	PromptContinue = "prompts/continue"
	PromptRevise   = "prompts/revise"
	PromptRebase   = "prompts/rebase"
	PromptRepair   = "prompts/repair"
	PromptTask     = "prompts/task"
	PromptStall    = "prompts/stall"
	PromptReview   = "prompts/review"
	PromptCIFix    = "prompts/cifix"
	// PromptReviewPR is a review run's (ModeReview): the pull request,
	// its diff, the validation and the threads so far.
	PromptReviewPR = "prompts/review_pr"
	// PromptFix is a fix run's (ModeFix): the change a writer asked for
	// on a pull request's branch.
	PromptFix = "prompts/fix"
	// PromptReport renders an outsider's vouched report (Task.Report) as
	// the task's body the other prompts show.
	PromptReport = "prompts/report"
)

func render(set *templates.Set, name string, data PromptData) (string, error) {
	return set.Render(name, data)
}
