package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// startRequest is everything a handler knows when it asks for a run.
type startRequest struct {
	InstallationID int64              `json:"installation_id"`
	Repo           *github.Repository `json:"-"`
	// Number is the issue or PR the run belongs to (lock, labels, replies).
	Number int  `json:"number"`
	IsPR   bool `json:"is_pr,omitempty"`
	// Issue is the issue whose text is the task (the PR's issue for PR runs).
	Issue      int              `json:"issue"`
	Mode       dispatch.Mode    `json:"mode"`
	Trigger    string           `json:"trigger"` // delivery id or comment id: part of the task id
	DeliveryID string           `json:"delivery_id,omitempty"`
	Sender     string           `json:"sender,omitempty"`
	Flags      sandboxcfg.Flags `json:"flags"`
	Plan       string           `json:"plan,omitempty"`
	// PlanTask is the plan run whose plan Plan is: an execute run resumes
	// its agent session (session.go).
	PlanTask string `json:"plan_task,omitempty"`
	// PlanSHA is the digest of that plan as its run wrote it, from the
	// plan comment's marker: the session must name the same.
	PlanSHA string `json:"plan_sha,omitempty"`
	// PlanFiles are the files the approved plan names, from its marker.
	PlanFiles []dispatch.PlanFile `json:"plan_files,omitempty"`
	Feedback  string              `json:"feedback,omitempty"`
	Round     int                 `json:"round,omitempty"`
	Attempt   int                 `json:"attempt,omitempty"`
	// Branch is the branch to work on (revise, continue, rebase); execute
	// derives a new one.
	Branch string `json:"branch,omitempty"`
	// BaseBranch overrides the configured base (a PR's base).
	BaseBranch string `json:"base_branch,omitempty"`
	// CommentID is the command comment, which gets the 👀 reaction.
	CommentID int64 `json:"comment_id,omitempty"`
	// Command is the command that asked for the run ("" for labels,
	// reviews and pushes), for replies.
	Command string `json:"command,omitempty"`
	// Instructions are a writer's words to the App (the text after an
	// @mention), added to the task.
	Instructions *dispatch.Comment `json:"instructions,omitempty"`
	// queuedAs is the task id of a queued run being started (queue.go).
	queuedAs string
	// Inline are the inline review comments a revise run addresses; the
	// acknowledgement's marker keeps them for the replies (batch.go).
	Inline []int64 `json:"inline,omitempty"`
	// FeedbackUpto is the newest conversation comment the feedback was
	// read up to, kept in the acknowledgement's marker.
	FeedbackUpto int64 `json:"feedback_upto,omitempty"`
	// FeedbackImages are the texts of the feedback that hold images, shown
	// to the agent before the issue's own (images.go).
	FeedbackImages []imageSource `json:"feedback_images,omitempty"`
	// CI is what a CI fix run fixes (ci.go).
	CI *dispatch.CIReport `json:"ci,omitempty"`
	// Head is where a fix run's pull request branch must still be: the
	// commit the review was of (fix.go).
	Head string `json:"head,omitempty"`
	// Set, Variant and Variants make the run attempt Variant of
	// Variants execute runs of one approval (attempts.go); Set is the
	// approval's task id. Kept in a queued request, so a queued attempt
	// starts as one.
	Set      string `json:"set,omitempty"`
	Variant  int    `json:"variant,omitempty"`
	Variants int    `json:"variants,omitempty"`
	// Vouch is, for a run a writer's label or mention started on an
	// issue, what they vouched for (vouch.go); other runs read the newest
	// vouch from the issue's acknowledgements.
	Vouch *markers.Vouch `json:"vouch,omitempty"`
}

func (r *startRequest) name() string { return r.Repo.GetName() }

// starter starts runs: from the table's starting actions, the queue, the
// review batches and the follower's continuations. A start resolves the
// configuration, takes the issue's lock, goes through the queue, submits
// the run, acknowledges it and hands it to the follower.
// It owns the lock, the caps and the queue, the redelivery check and the
// submission (launch.go, queue.go); what a kind of run writes is its
// runKind's.
type starter struct {
	c    *core
	runs *follow.Runs
	// sets are the approvals of several attempts (attempts.go).
	sets  *attemptSets
	agent agentRun
	// claims re-runs admission when a claim without a run ends its grace.
	claims *claimWatch
}

// start starts a run of the agent on an issue or pull request and makes
// sure a failure reaches the issue: once a trigger is accepted, any error
// (configuration read, token, lock, submission) ends in one comment saying
// what failed and what to do, and the agent:failed label (failure.go).
// Otherwise a person who labeled the issue would wait for a run that
// never comes. A failed submission is tried again (submit) before this
// sees an error.
func (s *starter) start(ctx context.Context, gh hub.GitHub, req startRequest) error {
	requestedAt := time.Now().UTC()
	l, ok, err := s.resolve(ctx, gh, req)
	if err != nil {
		return s.agent.failedToStart(ctx, gh, req, err, false)
	}
	if !ok {
		return nil
	}
	l.requestedAt = requestedAt
	if l.mode == dispatch.ModeExecute && req.Variant == 0 && l.cfg.NumAttempts() > 1 {
		return s.sets.start(ctx, gh, l)
	}
	if req.Variant > 0 {
		l.lockKey = attemptLockKey(req.Repo.GetFullName(), req.Number, req.Variant)
		l.kind = attemptRun{agentRun: s.agent, sets: s.sets}
	}
	return s.begin(ctx, gh, l)
}

// agentRun is the kind of every run of the agent on an issue or pull
// request (plan, execute, revise, rebase, continue, task, retry, CI fix):
// its spec carries the task's text and a token, its replies are the
// acknowledgement, the busy reply and the start-failure comment.
type agentRun struct{ c *core }

func (a agentRun) busy(ctx context.Context, gh hub.GitHub, l launch, holder string) error {
	return a.replyBusyNow(ctx, gh, l.req, holder, l.mode)
}

func (a agentRun) failed(ctx context.Context, gh hub.GitHub, l launch, err error, locked bool) error {
	return a.failedToStart(ctx, gh, l.req, err, locked)
}

// resolve checks the request's flags, reads the configuration, and picks
// the mode and the task id. ok is false when the request was answered
// instead (a refusal).
func (s *starter) resolve(ctx context.Context, gh hub.GitHub, req startRequest) (launch, bool, error) {
	logger := zerolog.Ctx(ctx)
	if req.Issue == 0 {
		req.Issue = req.Number
	}
	if over, ok := s.flagOverCeiling(req.Command, req.Flags); ok {
		logger.Info().Str("flag", over.Flag).Str("asked", over.Asked).Msg("refusing: flag over the server ceiling")
		return launch{}, false, s.c.reply(ctx, gh, req.Number, "github/over_ceiling", over)
	}
	cfg, err := s.c.loadConfig(ctx, req.InstallationID, gh, req.BaseBranch, req.Flags)
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		logger.Info().Err(err).Msg("refusing to dispatch: invalid configuration")
		return launch{}, false, s.c.reply(ctx, gh, req.Number, "github/config_error", ConfigErrorData{
			Source: cfgErr.Source, Error: cfgErr.Error(), File: sandboxcfg.FileName,
		})
	}
	if err != nil {
		return launch{}, false, err
	}
	mode := req.Mode
	if cfg.Mode == sandboxcfg.ModeTask && (mode == dispatch.ModePlan || mode == dispatch.ModeExecute) {
		mode = dispatch.ModeTask
	}
	if mode == dispatch.ModePlan && !cfg.Plan.Required {
		mode = dispatch.ModeExecute
	}
	l := newLaunch(req, mode, cmp.Or(req.queuedAs, dispatch.NewTaskID(req.Repo.GetFullName(), req.Number, mode, req.Trigger)), s.agent)
	l.cfg, l.base = cfg, cmp.Or(req.BaseBranch, cfg.Branch, req.Repo.GetDefaultBranch())
	return l, true, nil
}

// built is a run ready to submit, and what its acknowledgement says.
type built struct {
	spec     dispatch.RunSpec
	branch   string
	excluded excludedText
	// images are the pictures found for the run, given or not.
	images []markers.ImageNote
}

// runSpec reads the task's text, names the branch, mints the token and
// writes the work order.
func (a agentRun) build(ctx context.Context, gh hub.GitHub, l launch) (built, error) {
	req := l.req
	in, err := a.taskText(ctx, gh, req.Issue, l.cfg.Reports.Quoted(), req.Vouch)
	if err != nil {
		return built{}, err
	}
	task, excluded := in.task, in.excluded
	task.Instructions = req.Instructions
	var images []dispatch.Image
	var notes []markers.ImageNote
	if takesImages(l.mode, req) {
		images, notes = a.imagesFor(ctx, gh, append(slices.Clone(req.FeedbackImages), withImages(in.images)...))
	}
	branch := req.Branch
	if branch == "" && l.mode == dispatch.ModeExecute {
		branch = dispatch.BranchName(l.taskID, task.Title)
		if req.Variant > 0 {
			branch = attemptBranch(req.Set, req.Variant)
		}
	}
	token, _, err := a.c.mintToken(ctx, req.InstallationID, req.name(), l.mode)
	if err != nil {
		return built{}, err
	}
	attempt := max(req.Attempt, 1)
	full := req.Repo.GetFullName()
	spec := dispatch.RunSpec{
		Meta: dispatch.Meta{
			TaskID: l.taskID, Mode: l.mode, Repo: full, RepoID: req.Repo.GetID(), Number: req.Number, InstallationID: req.InstallationID,
			Attempt: attempt, DeliveryID: req.DeliveryID, Requester: req.Sender, Model: l.cfg.Model,
			Set: req.Set, Variant: req.Variant, Variants: req.Variants,
		},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: l.taskID, Mode: l.mode, Attempt: attempt,
			Repo: full, RepoID: req.Repo.GetID(), Number: req.Number, CloneURL: req.Repo.GetCloneURL(), BaseBranch: l.base, TargetBranch: branch,
			Task: task, Plan: req.Plan, PlanFiles: a.planFiles(ctx, gh, req, l.mode), Feedback: req.Feedback, Config: l.cfg,
			BudgetUSD: l.cfg.MaxBudgetUSD, TimeoutMinutes: l.cfg.TimeoutMinutes, SecretEnv: a.c.SecretEnv,
			RequestedAt: l.requestedAt, CI: req.CI, Images: images, Variant: req.Variant, Variants: req.Variants,
		},
		Token:     token,
		Isolation: a.c.Isolation,
	}
	if l.mode == dispatch.ModeTask {
		spec.Order.CloneURL, spec.Order.TargetBranch = "", ""
	}
	if l.mode == dispatch.ModeReview {
		if spec.Order.PR, err = a.reviewOrder(ctx, gh, req); err != nil {
			return built{}, err
		}
		spec.Meta.HeadSHA = spec.Order.PR.HeadSHA
	}
	switch l.mode {
	case dispatch.ModeFix:
		spec.Order.PR = &dispatch.PRReview{HeadSHA: req.Head}
		spec.Meta.HeadSHA = req.Head
	case dispatch.ModeSuggest:
		spec.Order.PR = &dispatch.PRReview{HeadRef: fmt.Sprintf("refs/pull/%d/head", req.Number), HeadSHA: req.Head}
		spec.Meta.HeadSHA = req.Head
	}
	if l.mode == dispatch.ModeExecute {
		spec.Order.Session = a.sessionHandoff(ctx, req.PlanTask)
		if h := spec.Order.Session; h != nil {
			h.RepoID, h.PlanSHA256 = req.Repo.GetID(), req.PlanSHA
		}
	}
	return built{spec: spec, branch: branch, excluded: excluded, images: notes}, nil
}

// acknowledge tells the issue a submitted run started: the 👀 reaction,
// the state label and the acknowledgement with its marker, written under
// the lock the run now holds.
func (a agentRun) announce(ctx context.Context, gh hub.GitHub, l launch, r built) error {
	log := zerolog.Ctx(ctx)
	req, mode := l.req, l.mode
	log.Info().Str("mode", string(mode)).Str("branch", r.branch).Msg("run submitted")
	if err := gh.React(ctx, req.Number, req.CommentID, "eyes"); err != nil {
		log.Warn().Err(err).Msg("add reaction")
	}
	place := lifecycle.OnIssue
	if req.IsPR {
		place = lifecycle.OnPR
	}
	labelErr := a.c.setState(ctx, gh, req.Number, lifecycle.RunState(place, mode))
	attempt := r.spec.Meta.Attempt
	err := a.c.reply(ctx, gh, req.Number, "github/ack", AckData{
		TaskID: l.taskID, Mode: mode, Branch: r.branch, Budget: l.cfg.MaxBudgetUSD, Excluded: r.excluded.Commenters,
		IssueAuthorExcluded: r.excluded.IssueAuthor, ReportWithheld: r.excluded.Withheld, Issue: req.Issue, Report: reportAck(r.excluded.Report), CI: ciAck(req.CI),
		Round: req.Round, Attempt: attempt, Harness: l.cfg.Harness, HasPlan: req.Plan != "", LiveURL: a.c.Receipts.LiveURL(l.taskID),
		Marker: markers.Marker{Kind: markers.KindAck, TaskID: l.taskID, Mode: mode, Issue: req.Issue, Branch: r.branch, Round: req.Round, Attempt: attempt,
			Inline: req.Inline, Upto: req.FeedbackUpto, Images: r.images, CIHead: ciHead(req.CI), CIChecks: ciChecks(req.CI), Vouch: req.Vouch}.String(),
	})
	if err != nil {
		log.Warn().Err(err).Msg("post acknowledgement")
	}
	return labelErr
}

// takesImages says whether a run is given the images of its texts: a run
// that starts the agent on the task (plan, execute, task) or on review
// feedback; not a CI fix, a rebase or a continuation, whose agent has its
// task from the branch (or its session).
func takesImages(mode dispatch.Mode, req startRequest) bool {
	switch mode {
	case dispatch.ModePlan, dispatch.ModeExecute, dispatch.ModeTask:
		return true
	case dispatch.ModeRevise:
		return req.CI == nil
	}
	return false
}

// withTask adds the task id to the context's logger.
func withTask(ctx context.Context, taskID string) (context.Context, zerolog.Logger) {
	log := zerolog.Ctx(ctx).With().Str("task_id", taskID).Logger()
	return log.WithContext(ctx), log
}

// reply renders a github/ template and posts it as a comment.
func (c *core) reply(ctx context.Context, gh hub.GitHub, number int, tmpl string, data any) error {
	body, err := c.Templates.Render(tmpl, data)
	if err != nil {
		return err
	}
	if _, err = gh.Comment(ctx, number, strings.TrimSpace(body)); err == nil {
		zerolog.Ctx(ctx).Debug().Str("reply", tmpl).Int("number", number).Msg("replied")
	}
	return err
}

// react adds a reaction to a comment; a failure only costs the reaction.
func (c *core) react(ctx context.Context, gh hub.GitHub, number int, commentID int64, content string) {
	if err := gh.React(ctx, number, commentID, content); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("add reaction")
	}
}

// planFiles are the approved plan's files for a run that implements it:
// what the request carries (an /approve read them from the plan comment's
// marker), else, for a revise or continue run on the pull request, the
// marker of the issue's newest plan comment.
func (a agentRun) planFiles(ctx context.Context, gh hub.GitHub, req startRequest, mode dispatch.Mode) []dispatch.PlanFile {
	if req.PlanFiles != nil || (mode != dispatch.ModeContinue && mode != dispatch.ModeRevise) || req.Issue == 0 {
		return req.PlanFiles
	}
	marked, err := a.c.botMarked(ctx, gh, req.Issue)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Int("issue", req.Issue).Msg("the plan's files could not be read; the change is not compared with them")
		return nil
	}
	if m, ok := markers.Last(marked, markers.KindPlan, ""); ok {
		return m.Marker.Files
	}
	return nil
}
