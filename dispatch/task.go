// Package dispatch holds the contracts between the bot and the sandbox: the
// task model (modes, identities, the work order), the result the runner
// leaves behind, the progress lines it prints, and the Backend interface that
// the docker and nomad implementations satisfy.
package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// Mode is what a run does.
type Mode string

// The modes of a run.
const (
	ModePlan     Mode = "plan"     // read-only: write an implementation plan
	ModeExecute  Mode = "execute"  // implement the approved plan on a new branch
	ModeRevise   Mode = "revise"   // apply review feedback on the PR branch
	ModeContinue Mode = "continue" // resume an interrupted run on its branch
	ModeRebase   Mode = "rebase"   // bring the PR branch up to date with its base
	ModeTask     Mode = "task"     // no repository: produce artifacts
	// ModePreview serves a pull request's head with its dev server for a
	// bounded time: a task-mode sandbox (no token, no inner daemon, one
	// user) given the code as an archive the bot fetched.
	ModePreview Mode = "preview"
	// ModeReview reviews a pull request (anyone's, a fork's too) having
	// run its validation: read-only, a contents:read token, the PR's head
	// checked out; the agent's final message is the review the bot posts.
	ModeReview Mode = "review"
	// ModeFix changes a pull request's branch as a writer asked (/fix):
	// one commit, pushed only when the run completed and only if the
	// branch is still where it was (a fast-forward, never forced).
	ModeFix Mode = "fix"
	// ModeSuggest is a fix of a fork's pull request, whose branch the App
	// cannot push to: read-only, its change comes back as a patch the bot
	// posts as suggested changes on the lines of the diff.
	ModeSuggest Mode = "suggest"
)

// Modes lists every mode, for validation and help texts.
var Modes = []Mode{ModePlan, ModeExecute, ModeRevise, ModeContinue, ModeRebase, ModeTask, ModePreview, ModeReview, ModeFix, ModeSuggest}

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool {
	for _, x := range Modes {
		if m == x {
			return true
		}
	}
	return false
}

// WritesCode reports whether the run may change the repository.
func (m Mode) WritesCode() bool {
	return m != ModePlan && m != ModeTask && m != ModePreview && m != ModeReview && m != ModeSuggest
}

// Clones reports whether the mode's runner clones the repository: task
// mode has no repository, and a preview gets its code as an archive.
func (m Mode) Clones() bool { return m != ModeTask && m != ModePreview }

// TaskSandbox reports whether the order runs in a task sandbox: one user,
// no inner daemon, no privileges, no fence. A preview never does, whatever
// its configuration says: it serves code an agent wrote, so it gets the
// coding sandbox's wall (root init, runner and agent apart, the deny
// chain and network.allow), without a token or provider keys.
func (w *WorkOrder) TaskSandbox() bool {
	return w.Mode == ModeTask || (w.Mode != ModePreview && w.Config.Mode == sandboxcfg.ModeTask)
}

var taskIDPattern = regexp.MustCompile(`^T-[0-9A-F]{8}$`)

// NewTaskID derives the task id from the triggering event, so a redelivered
// webhook maps to the same task and the backend's create-only submission
// turns the redelivery into a no-op. trigger is the delivery id or the
// comment id that started the run.
func NewTaskID(repo string, number int, mode Mode, trigger string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%s\x00%s", strings.ToLower(repo), number, mode, trigger)))
	return "T-" + strings.ToUpper(hex.EncodeToString(sum[:4]))
}

// ValidTaskID reports whether id has the T-XXXXXXXX shape.
func ValidTaskID(id string) bool { return taskIDPattern.MatchString(id) }

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// Slug turns an issue title into the tail of a branch name.
func Slug(title string) string {
	s := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(title), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" {
		s = "task"
	}
	return s
}

// BranchPrefix begins every branch the agent's runs create, and only
// theirs: the bot tells its own branches (and the pull requests, checks
// and reviews on them) by it.
const BranchPrefix = "agent/"

// BranchName is agent/<task-id>-<slug>, the branch an execute run creates.
func BranchName(taskID, title string) string {
	return BranchPrefix + strings.ToLower(taskID) + "-" + Slug(title)
}

// Comment is one comment passed on to the agent. Only comments by writers
// are ever put in a work order.
type Comment struct {
	Author string `json:"author"`
	Body   string `json:"body"`
}

// TaskText is what the agent is asked to do.
type TaskText struct {
	Title    string    `json:"title"`
	Body     string    `json:"body"`
	Comments []Comment `json:"comments,omitempty"`
	URL      string    `json:"url,omitempty"`
	// Instructions are what a writer asked the App for when they started
	// the run by mentioning it (the text after the mention).
	Instructions *Comment `json:"instructions,omitempty"`
	// Report is the title and body when its author cannot write
	// to the repository and a writer vouched for it; Title and Body are
	// then "Issue #N" and empty, as without it.
	Report *Report `json:"report,omitempty"`
}

// WorkOrderVersion is bumped on any incompatible change of WorkOrder.
// 2: config is the resolved configuration (sandboxcfg.Resolved), every
// default filled in, no longer a file layer the sandbox completes.
const WorkOrderVersion = 2

// WorkOrder is what the bot hands the runner (as JSON). It never carries the
// token itself, only where the token file is.
type WorkOrder struct {
	SchemaVersion int    `json:"schema_version"`
	TaskID        string `json:"task_id"`
	Mode          Mode   `json:"mode"`
	// Attempt counts continue runs of the same task, starting at 1.
	Attempt int `json:"attempt"`
	// Variant is k of an approval's Variants execute runs (/approve
	// --attempts N): the agent is told it is attempt k of N, and the
	// ones after the first to take another approach where the plan
	// leaves room. 0 for a run that is one of one.
	Variant  int `json:"variant,omitempty"`
	Variants int `json:"variants,omitempty"`

	Repo         string `json:"repo,omitempty"`    // owner/name
	RepoID       int64  `json:"repo_id,omitempty"` // GitHub's id of Repo, which a rename keeps
	Number       int    `json:"number,omitempty"`  // issue or PR number
	CloneURL     string `json:"clone_url,omitempty"`
	BaseBranch   string `json:"base_branch,omitempty"`
	TargetBranch string `json:"target_branch,omitempty"`

	Task TaskText `json:"task"`
	Plan string   `json:"plan,omitempty"` // the approved plan (execute, continue)
	// PlanFiles are the files and areas the approved plan names, kept with
	// the plan's marker: execute, continue and revise compare the change
	// with them (empty: the plan named none, nothing is compared).
	PlanFiles []PlanFile `json:"plan_files,omitempty"`
	Feedback  string     `json:"feedback,omitempty"` // review feedback (revise, plan re-rounds)

	// Config is the resolved .sandbox.yml: the runner and the init read
	// it as it is.
	Config         sandboxcfg.Resolved `json:"config"`
	BudgetUSD      float64             `json:"budget_usd"`
	TimeoutMinutes int                 `json:"timeout_minutes"`

	// TokenFile is read by the runner's git credential helper on every use,
	// so a refreshed token is picked up without a restart.
	TokenFile string `json:"token_file,omitempty"`
	// OutputDir receives result.json and media.
	OutputDir string `json:"output_dir"`
	// GatewayFile is the model gateway's providers file (keys included),
	// read by the sandbox's init only; empty when no provider is served.
	GatewayFile string `json:"gateway_file,omitempty"`
	// SecretEnv names the environment variables that hold secrets given to
	// the run; their values resolve ${VAR} and are redacted from output.
	SecretEnv []string `json:"secret_env,omitempty"`
	// Session hands the approved plan's agent session to an execute run,
	// which resumes it where it can (see SessionHandoff); absent, the
	// agent starts a fresh session with the plan in its prompt.
	Session *SessionHandoff `json:"session,omitempty"`
	// RequestedAt is when the bot (or the CLI) asked for the run: the
	// receipt's time to the agent's first step counts from it.
	RequestedAt time.Time `json:"requested_at,omitzero"`
	// Source is where the code of a preview is, as a gzipped tar the bot
	// fetched from GitHub (SourcePath): a preview sandbox has no token to
	// clone with.
	Source string `json:"source,omitempty"`
	// PreviewSeconds is how long a preview serves its dev server; the run
	// then ends as completed (TimeoutMinutes bounds it too).
	PreviewSeconds int `json:"preview_seconds,omitempty"`
	// CI is what a CI fix run (revise mode) fixes: the checks that failed
	// on the pull request's head.
	CI *CIReport `json:"ci,omitempty"`
	// Images are the pictures of the issue and of the feedback, which the
	// runner hands to the agent with the prompt.
	Images []Image `json:"images,omitempty"`
	// PR is the pull request a review run reviews (ModeReview), or whose
	// branch a fix run changes (ModeFix: HeadSHA is where the branch must
	// still be).
	PR *PRReview `json:"pr,omitempty"`
}

// PRReview is what a review run is given of the pull request: where its
// head is, its diff as GitHub shows it, the review threads so far and
// what the writer asked to look at.
type PRReview struct {
	// HeadRef is the ref the head is fetched from (refs/pull/N/head, which
	// a fork's pull request has in the base repository too), HeadSHA the
	// commit the review is of.
	HeadRef string `json:"head_ref"`
	HeadSHA string `json:"head_sha"`
	// Diff is the pull request's diff (files and hunks), clipped.
	Diff string `json:"diff"`
	// Threads are the review threads so far, as the bot quoted them.
	Threads string `json:"threads,omitempty"`
	// Focus is the writer's text after /review.
	Focus string `json:"focus,omitempty"`
}

// Validate checks the fields every mode needs.
func (w *WorkOrder) Validate() error {
	var problems []string
	if w.SchemaVersion != WorkOrderVersion {
		problems = append(problems, fmt.Sprintf("schema_version %d is not supported (want %d)", w.SchemaVersion, WorkOrderVersion))
	}
	if !ValidTaskID(w.TaskID) {
		problems = append(problems, fmt.Sprintf("task_id %q is not of the form T-XXXXXXXX", w.TaskID))
	}
	if !w.Mode.Valid() {
		problems = append(problems, fmt.Sprintf("mode %q is not one of %v", w.Mode, Modes))
	}
	if w.Mode.Clones() && w.CloneURL == "" {
		problems = append(problems, "clone_url is required outside task mode")
	}
	if w.Mode == ModePreview && (w.Source == "" || w.Config.Dev.Command == "" || w.Config.Dev.Port == 0) {
		problems = append(problems, "a preview needs source (the code's archive) and dev.command and dev.port")
	}
	if w.Mode.WritesCode() && w.TargetBranch == "" {
		problems = append(problems, "target_branch is required in "+string(w.Mode)+" mode")
	}
	if w.Mode == ModeExecute && strings.TrimSpace(w.Plan) == "" && w.Config.Plan.Required {
		problems = append(problems, "plan is required in execute mode when plan.required is true")
	}
	if w.OutputDir == "" {
		problems = append(problems, "output_dir is required")
	}
	if (w.Mode == ModeReview || w.Mode == ModeSuggest) && (w.PR == nil || w.PR.HeadRef == "" || w.PR.HeadSHA == "") {
		problems = append(problems, "a "+string(w.Mode)+" run needs pr.head_ref and pr.head_sha")
	}
	if w.CI != nil && w.Mode != ModeRevise {
		problems = append(problems, "ci is for revise mode only")
	}
	for i, img := range w.Images {
		if !slices.Contains(ImageMediaTypes, img.MediaType) || len(img.Data) == 0 {
			problems = append(problems, fmt.Sprintf("images[%d] is not one of %v with data", i, ImageMediaTypes))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("work order: %s", strings.Join(problems, "; "))
	}
	return nil
}
