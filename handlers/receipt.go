package handlers

import (
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Receipt is what one run did and where it came from, as the bot reports it
// once the run has ended: the part every result template shares, and the
// record a receipt store keeps. Result is nil when the sandbox ended
// without writing one (it was killed or its machine went away).
type Receipt struct {
	TaskID string        `json:"task_id"`
	Mode   dispatch.Mode `json:"mode"`
	// Repo is owner/name.
	Repo string `json:"repo"`
	// Issue is the issue the run serves; Number is where it was asked for
	// (the issue, or the agent's pull request for revise and rebase).
	Issue  int `json:"issue"`
	Number int `json:"number"`
	// Branch is the run's branch: the receipt's, else the one the run was
	// started on.
	Branch string `json:"branch,omitempty"`
	// Attempt counts continue runs of one task (1 for the first).
	Attempt int `json:"attempt,omitempty"`
	// Round is the plan round (0 outside plan runs).
	Round int `json:"round,omitempty"`
	// CIChecks are the failing checks a CI fix run was for (ci.go).
	CIChecks []string         `json:"ci_checks,omitempty"`
	Result   *dispatch.Result `json:"result,omitempty"`
}

// Status is the run's end as the bot treats it: the receipt's status, or
// interrupted when there is no receipt.
func (r Receipt) Status() dispatch.Status { return statusOf(r.Result) }

// marker is the hidden marker of a result comment of kind about the run.
func (r Receipt) marker(kind string) string {
	return markers.Marker{Kind: kind, TaskID: r.TaskID, Mode: r.Mode, Issue: r.Issue, Branch: r.Branch, Round: r.Round, Attempt: r.Attempt,
		Head: strings.ToLower(headOf(r.Result))}.String()
}

// The data each result template is rendered with: the Receipt, the
// hidden marker the comment carries, and what only that template says.

// DoneData is github/done: a revise, rebase or task run finished.
type DoneData struct {
	Receipt
	Marker string
}

// NoChangesData is github/no_changes: an execute or continue run finished
// without a commit.
type NoChangesData struct {
	Receipt
	Marker string
}

// FailureData is github/failure: the run failed, timed out, or was
// interrupted too often.
type FailureData struct {
	Receipt
	Marker string
	// Retry is the command that runs the task again.
	Retry string
}

// AbortedData is github/aborted: a person stopped the run with /abort.
type AbortedData struct {
	Receipt
	Marker string
	// By is who aborted it, when this replica saw the /abort.
	By string
}

// PlanCommentData is github/plan_comment: a plan run's plan.
type PlanCommentData struct {
	Receipt
	Marker    string
	MaxRounds int
	// CostSoFar is this round's cost plus the earlier rounds' on the issue.
	CostSoFar float64
	// PlanStart and PlanEnd must enclose the plan: /approve executes
	// exactly what is between them.
	PlanStart, PlanEnd string
	// Images are the pictures the bot found for the run (from its
	// acknowledgement): given to the agent, or not and why; ImagesNote is
	// the runner's word when it could not hand them over.
	Images     []markers.ImageNote
	ImagesNote string
}

// PRBodyData is github/pr_body: the body of the pull request a run opens.
type PRBodyData struct {
	Receipt
	Marker string
	// MediaBase prefixes the paths of committed screenshots and
	// recordings ("" when the run committed none).
	MediaBase string
	// PlanURL links the approved plan comment, "" without a plan step.
	PlanURL string
	// History is the runs section (history.go): every run on the PR with
	// the total cost, kept in the body across restarts.
	History string
	// Checks is the checks-before-the-PR section (prchecks.go, rendered
	// from github/pr_checks), "" when the receipt has none.
	Checks string
	// Attempts is the table of an approval's attempts (attempts.go),
	// "" for a run that is one of one.
	Attempts string
}

// PROpenedData is github/pr_opened: the comment on the issue that names
// the pull request.
type PROpenedData struct {
	Receipt
	Marker   string
	PRURL    string
	PRNumber int
}

// StartFailedData is github/start_failed: a run was asked for and could
// not start.
type StartFailedData struct {
	Marker string
	TaskID string
	Mode   dispatch.Mode
	// What failed and what to do, for people on the issue; the error itself
	// stays in the log.
	What, Todo string
	// Delivery is the webhook delivery, for the operator's log search.
	Delivery string
}

// StaleLockData is github/stale_lock: /abort found a lock whose run is
// gone, and released it.
type StaleLockData struct {
	Holder string
}

// AbortRequestedData is github/abort_requested: /abort reached a running
// task, which now pushes what it has and stops.
type AbortRequestedData struct {
	Marker string
	TaskID string
	By     string
}
