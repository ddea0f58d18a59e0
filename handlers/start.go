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
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
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
}

func (r *startRequest) name() string { return r.Repo.GetName() }

// starter starts runs: from the table's starting actions, the queue, the
// review batches and the follower's continuations. A start resolves the
// configuration, takes the issue's lock, goes through the queue, submits
// the run, acknowledges it and hands it to the follower.
type starter struct {
	*core
	runs *Runs
}

// launch is a start request resolved: the configuration, the mode it
// runs in, its task id and the issue's lock.
type launch struct {
	req     startRequest
	cfg     sandboxcfg.Resolved
	mode    dispatch.Mode
	base    string
	taskID  string
	lockKey string
	// requestedAt is when the worker took the event (or a queued run got
	// its slot): the receipt's time to the agent's first step counts from
	// it.
	requestedAt time.Time
}

// startRun resolves the request, takes the per-issue lock, puts the run
// through the queue, mints the token, submits the run and acknowledges it.
// Problems people can fix (bad config, a busy issue) become replies, not
// errors. handled is false for an error before the lock was taken, which
// start reports; anything after it (a failure to start, reported under the
// lock, or an error once the run was submitted) is handled here.
func (b *starter) startRun(ctx context.Context, gh GitHub, req startRequest) (handled bool, err error) {
	requestedAt := time.Now().UTC()
	l, ok, err := b.resolve(ctx, gh, req)
	if err != nil || !ok {
		return err == nil, err
	}
	l.requestedAt = requestedAt
	ctx, log := withTask(ctx, l.taskID)
	if holder, err := b.takeLock(ctx, gh, l); err != nil {
		if errors.Is(err, dispatch.ErrLocked) {
			log.Info().Str("holder", holder).Msg("issue busy; not starting a second run")
			return true, b.replyBusyNow(ctx, gh, req, holder, l.mode)
		}
		return false, fmt.Errorf("lock %s: %w", l.lockKey, err)
	}
	keep := false // the lock: a queued or submitted run keeps it
	defer func() {
		if !keep {
			if err := b.Backend.Unlock(context.WithoutCancel(ctx), l.lockKey, l.taskID); err != nil {
				log.Warn().Err(err).Msg("release lock after failed start")
			}
			b.freeSlot(context.WithoutCancel(ctx), l.taskID) // a queue slot it may have taken
		}
	}()
	wait, err := b.queueGate(ctx, gh, req, l.taskID, l.mode)
	if wait {
		keep = true
		return true, err
	}
	var r built
	if err == nil {
		r, err = b.runSpec(ctx, gh, l)
	}
	if err == nil {
		var created bool
		created, err = b.submit(ctx, r.spec)
		b.handOver(ctx, l.taskID, r.spec.Token, created, err)
		if err == nil {
			keep = true
			return true, b.acknowledge(ctx, gh, l, r, created)
		}
		err = fmt.Errorf("submit %s run %s: %w", l.mode, l.taskID, err)
	}
	return true, b.failedToStart(ctx, gh, req, err, true)
}

// lockWait bounds how long a start waits for the lock of a run whose
// result is posted: its follower lets go once its bookkeeping is done.
const lockWait = 10 * time.Second

// takeLock takes the issue's lock for l. A run that holds it but whose
// result is on the issue already (a person answered the plan the moment
// it appeared) is waited for, lockWait at most, instead of answered busy.
func (b *starter) takeLock(ctx context.Context, gh GitHub, l launch) (string, error) {
	deadline := b.Now().Add(lockWait)
	for checked := false; ; checked = true {
		holder, err := b.Backend.Lock(ctx, l.lockKey, l.taskID)
		if !errors.Is(err, dispatch.ErrLocked) || b.Now().After(deadline) {
			return holder, err
		}
		if !checked {
			marked, merr := b.botMarked(ctx, gh, l.req.Number)
			if merr != nil || !ended(marked, holder) {
				return holder, err
			}
			zerolog.Ctx(ctx).Info().Str("holder", holder).Msg("the run holding the issue has ended; waiting for its follower to let go")
		}
		if !pause(ctx, 50*time.Millisecond) {
			return holder, err
		}
	}
}

// resolve checks the request's flags, reads the configuration, picks the
// mode and the task id, and makes sure the trigger did not act already.
// ok is false when the request was answered instead (a refusal) or is a
// redelivery.
func (b *starter) resolve(ctx context.Context, gh GitHub, req startRequest) (launch, bool, error) {
	logger := zerolog.Ctx(ctx)
	if req.Issue == 0 {
		req.Issue = req.Number
	}
	l := launch{req: req, base: req.BaseBranch, lockKey: dispatch.LockKey(req.Repo.GetFullName(), req.Number)}
	if over, ok := b.flagOverCeiling(req.Command, req.Flags); ok {
		logger.Info().Str("flag", over.Flag).Str("asked", over.Asked).Msg("refusing: flag over the server ceiling")
		return l, false, b.reply(ctx, gh, req.Number, "github/over_ceiling", over)
	}
	cfg, err := b.loadConfig(ctx, req.InstallationID, gh, l.base, req.Flags)
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		logger.Info().Err(err).Msg("refusing to dispatch: invalid configuration")
		return l, false, b.reply(ctx, gh, req.Number, "github/config_error", ConfigErrorData{
			Source: cfgErr.Source, Error: cfgErr.Error(), File: sandboxcfg.FileName,
		})
	}
	if err != nil {
		return l, false, err
	}
	l.cfg = cfg
	l.base = cmp.Or(l.base, cfg.Branch, req.Repo.GetDefaultBranch())
	l.mode = req.Mode
	if cfg.Mode == sandboxcfg.ModeTask && (l.mode == dispatch.ModePlan || l.mode == dispatch.ModeExecute) {
		l.mode = dispatch.ModeTask
	}
	if l.mode == dispatch.ModePlan && !cfg.Plan.Required {
		l.mode = dispatch.ModeExecute
	}
	l.taskID = cmp.Or(req.queuedAs, dispatch.NewTaskID(req.Repo.GetFullName(), req.Number, l.mode, req.Trigger))
	if acted, err := b.actedOn(ctx, gh, req.Number, l.taskID, req.queuedAs != ""); err != nil || acted {
		if acted {
			logger.Info().Str("task_id", l.taskID).Msg("task already acted on (its marker is on GitHub): redelivered event, nothing to do")
		}
		return l, false, err
	}
	return l, true, nil
}

// built is a run ready to submit, and what its acknowledgement says.
type built struct {
	spec     dispatch.RunSpec
	branch   string
	excluded excludedText
	// images are the pictures found for the run, given or not.
	images []ImageNote
}

// runSpec reads the task's text, names the branch, mints the token and
// writes the work order.
func (b *starter) runSpec(ctx context.Context, gh GitHub, l launch) (built, error) {
	req := l.req
	in, err := b.taskText(ctx, gh, req.Issue, l.cfg.Reports.Quoted(), req.Sender)
	if err != nil {
		return built{}, err
	}
	task, excluded := in.task, in.excluded
	task.Instructions = req.Instructions
	var images []dispatch.Image
	var notes []ImageNote
	if takesImages(l.mode, req) {
		images, notes = b.imagesFor(ctx, gh, append(slices.Clone(req.FeedbackImages), withImages(in.images)...))
	}
	branch := req.Branch
	if branch == "" && l.mode == dispatch.ModeExecute {
		branch = dispatch.BranchName(l.taskID, task.Title)
	}
	token, _, err := b.mintToken(ctx, req.InstallationID, req.name(), l.mode)
	if err != nil {
		return built{}, err
	}
	attempt := max(req.Attempt, 1)
	full := req.Repo.GetFullName()
	spec := dispatch.RunSpec{
		Meta: dispatch.Meta{
			TaskID: l.taskID, Mode: l.mode, Repo: full, RepoID: req.Repo.GetID(), Number: req.Number, InstallationID: req.InstallationID,
			Attempt: attempt, DeliveryID: req.DeliveryID,
		},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: l.taskID, Mode: l.mode, Attempt: attempt,
			Repo: full, RepoID: req.Repo.GetID(), Number: req.Number, CloneURL: req.Repo.GetCloneURL(), BaseBranch: l.base, TargetBranch: branch,
			Task: task, Plan: req.Plan, PlanFiles: b.planFiles(ctx, gh, req, l.mode), Feedback: req.Feedback, Config: l.cfg,
			BudgetUSD: l.cfg.MaxBudgetUSD, TimeoutMinutes: l.cfg.TimeoutMinutes, SecretEnv: b.SecretEnv,
			RequestedAt: l.requestedAt, CI: req.CI, Images: images,
		},
		Token:     token,
		Isolation: b.Isolation,
	}
	if l.mode == dispatch.ModeTask {
		spec.Order.CloneURL, spec.Order.TargetBranch = "", ""
	}
	if l.mode == dispatch.ModeExecute {
		spec.Order.Session = b.sessionHandoff(ctx, req.PlanTask)
		if h := spec.Order.Session; h != nil {
			h.RepoID, h.PlanSHA256 = req.Repo.GetID(), req.PlanSHA
		}
	}
	return built{spec: spec, branch: branch, excluded: excluded, images: notes}, nil
}

// acknowledge tells the issue a submitted run started: the 👀 reaction,
// the state label and the acknowledgement with its marker, written under
// the lock the run now holds. Then the run is followed.
func (b *starter) acknowledge(ctx context.Context, gh GitHub, l launch, r built, created bool) error {
	log := zerolog.Ctx(ctx)
	if !created {
		log.Info().Msg("run exists already (redelivered event); nothing to do")
		return nil
	}
	req, mode := l.req, l.mode
	log.Info().Str("mode", string(mode)).Str("branch", r.branch).Msg("run submitted")
	if err := gh.React(ctx, req.Number, req.CommentID, "eyes"); err != nil {
		log.Warn().Err(err).Msg("add reaction")
	}
	place := lifecycle.OnIssue
	if req.IsPR {
		place = lifecycle.OnPR
	}
	labelErr := b.setState(ctx, gh, req.Number, lifecycle.RunState(place, mode))
	attempt := r.spec.Meta.Attempt
	err := b.reply(ctx, gh, req.Number, "github/ack", AckData{
		TaskID: l.taskID, Mode: mode, Branch: r.branch, Budget: l.cfg.MaxBudgetUSD, Excluded: r.excluded.Commenters,
		IssueAuthorExcluded: r.excluded.IssueAuthor, Issue: req.Issue, Report: reportAck(r.excluded.Report), CI: ciAck(req.CI),
		Round: req.Round, Attempt: attempt, Harness: l.cfg.Harness, HasPlan: req.Plan != "", LiveURL: b.Receipts.LiveURL(l.taskID),
		Marker: Marker{Kind: KindAck, TaskID: l.taskID, Mode: mode, Issue: req.Issue, Branch: r.branch, Round: req.Round, Attempt: attempt,
			Inline: req.Inline, Upto: req.FeedbackUpto, Images: r.images, CIHead: ciHead(req.CI), CIChecks: ciChecks(req.CI)}.String(),
	})
	if err != nil {
		log.Warn().Err(err).Msg("post acknowledgement")
	}
	b.runs.Follow(r.spec.Meta)
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
func (b *core) reply(ctx context.Context, gh GitHub, number int, tmpl string, data any) error {
	body, err := b.Templates.Render(tmpl, data)
	if err != nil {
		return err
	}
	if _, err = gh.Comment(ctx, number, strings.TrimSpace(body)); err == nil {
		zerolog.Ctx(ctx).Debug().Str("reply", tmpl).Int("number", number).Msg("replied")
	}
	return err
}

// react adds a reaction to a comment; a failure only costs the reaction.
func (b *core) react(ctx context.Context, gh GitHub, number int, commentID int64, content string) {
	if err := gh.React(ctx, number, commentID, content); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("add reaction")
	}
}

// planFiles are the approved plan's files for a run that implements it:
// what the request carries (an /approve read them from the plan comment's
// marker), else, for a revise or continue run on the pull request, the
// marker of the issue's newest plan comment.
func (b *starter) planFiles(ctx context.Context, gh GitHub, req startRequest, mode dispatch.Mode) []dispatch.PlanFile {
	if req.PlanFiles != nil || (mode != dispatch.ModeContinue && mode != dispatch.ModeRevise) || req.Issue == 0 {
		return req.PlanFiles
	}
	marked, err := b.botMarked(ctx, gh, req.Issue)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Int("issue", req.Issue).Msg("the plan's files could not be read; the change is not compared with them")
		return nil
	}
	if m, ok := lastMarked(marked, KindPlan, ""); ok {
		return m.Marker.Files
	}
	return nil
}
