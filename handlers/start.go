package handlers

import (
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
	PlanSHA  string `json:"plan_sha,omitempty"`
	Feedback string `json:"feedback,omitempty"`
	Round    int    `json:"round,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
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
}

func (r *startRequest) owner() string { return r.Repo.GetOwner().GetLogin() }
func (r *startRequest) name() string  { return r.Repo.GetName() }

// startRun resolves the configuration, takes the per-issue lock, mints the
// token, submits the run and acknowledges it. Problems people can fix (bad
// config, a busy issue) become replies, not errors; start reports the rest.
func (b *Base) startRun(ctx context.Context, client *github.Client, req startRequest) error {
	// The receipt's time to the agent's first step counts from here: the
	// worker took the event (or a queued run got its slot).
	requestedAt := time.Now().UTC()
	logger := zerolog.Ctx(ctx)
	owner, name, full := req.owner(), req.name(), req.Repo.GetFullName()
	if req.Issue == 0 {
		req.Issue = req.Number
	}
	if over, ok := b.flagOverCeiling(req.Command, req.Flags); ok {
		logger.Info().Str("flag", over.Flag).Str("asked", over.Asked).Msg("refusing: flag over the server ceiling")
		return b.reply(ctx, client, owner, name, req.Number, "github/over_ceiling", over)
	}
	base := req.BaseBranch
	cfg, err := b.loadConfig(ctx, client, owner, name, base, req.Flags)
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		logger.Info().Err(err).Msg("refusing to dispatch: invalid configuration")
		return b.reply(ctx, client, owner, name, req.Number, "github/config_error", ConfigErrorData{
			Source: cfgErr.Source, Error: cfgErr.Error(), File: sandboxcfg.FileName,
		})
	}
	if err != nil {
		return err
	}
	if base == "" {
		base = cfg.Branch
	}
	if base == "" {
		base = req.Repo.GetDefaultBranch()
	}
	mode := req.Mode
	if cfg.Mode == sandboxcfg.ModeTask && (mode == dispatch.ModePlan || mode == dispatch.ModeExecute) {
		mode = dispatch.ModeTask
	}
	if mode == dispatch.ModePlan && !cfg.PlanRequired() {
		mode = dispatch.ModeExecute
	}
	taskID := dispatch.NewTaskID(full, req.Number, mode, req.Trigger)
	if req.queuedAs != "" {
		taskID = req.queuedAs
	}
	ctx, log := withTask(ctx, taskID)
	if acted, err := b.actedOn(ctx, client, owner, name, req.Number, taskID, req.queuedAs != ""); err != nil {
		return err
	} else if acted {
		log.Info().Msg("task already acted on (its marker is on GitHub): redelivered event, nothing to do")
		return nil
	}
	lockKey := dispatch.LockKey(full, req.Number)
	if holder, err := b.Backend.Lock(ctx, lockKey, taskID); err != nil {
		if errors.Is(err, dispatch.ErrLocked) {
			log.Info().Str("holder", holder).Msg("issue busy; not starting a second run")
			return b.replyBusy(ctx, client, req, holder, mode)
		}
		return fmt.Errorf("lock %s: %w", lockKey, err)
	}
	started := false
	defer func() {
		if !started {
			if err := b.Backend.Unlock(context.WithoutCancel(ctx), lockKey, taskID); err != nil {
				log.Warn().Err(err).Msg("release lock after failed start")
			}
			b.freeSlot(context.WithoutCancel(ctx), taskID) // a queue slot it may have taken
		}
	}()
	if wait, err := b.queueGate(ctx, client, req, taskID, mode); err != nil || wait {
		started = wait // a queued run keeps the issue's lock
		return err
	}

	task, excluded, err := b.taskText(ctx, client, owner, name, req.Issue)
	if err != nil {
		return err
	}
	task.Instructions = req.Instructions
	branch := req.Branch
	if branch == "" && mode == dispatch.ModeExecute {
		branch = dispatch.BranchName(taskID, task.Title)
	}
	token, _, err := b.mintToken(ctx, req.InstallationID, name, mode)
	if err != nil {
		return err
	}
	budget := cfg.MaxBudgetUSD
	attempt := req.Attempt
	if attempt == 0 {
		attempt = 1
	}
	spec := dispatch.RunSpec{
		Meta: dispatch.Meta{
			TaskID: taskID, Mode: mode, Repo: full, Number: req.Number, InstallationID: req.InstallationID,
			Attempt: attempt, DeliveryID: req.DeliveryID,
		},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: taskID, Mode: mode, Attempt: attempt,
			Repo: full, RepoID: req.Repo.GetID(), Number: req.Number, CloneURL: req.Repo.GetCloneURL(), BaseBranch: base, TargetBranch: branch,
			Task: task, Plan: req.Plan, Feedback: req.Feedback, Config: *cfg,
			BudgetUSD: budget, TimeoutMinutes: cfg.TimeoutMinutes, SecretEnv: b.SecretEnv,
			RequestedAt: requestedAt,
		},
		Token:     token,
		Isolation: b.Isolation,
	}
	if mode == dispatch.ModeTask {
		spec.Order.CloneURL, spec.Order.TargetBranch = "", ""
	}
	if mode == dispatch.ModeExecute {
		spec.Order.Session = b.sessionHandoff(ctx, req.PlanTask)
		if h := spec.Order.Session; h != nil {
			h.RepoID, h.PlanSHA256 = req.Repo.GetID(), req.PlanSHA
		}
	}
	created, err := b.submit(ctx, spec)
	b.handOver(ctx, taskID, token, created, err)
	if err != nil {
		return fmt.Errorf("submit %s run %s: %w", mode, taskID, err)
	}
	started = true
	if !created {
		log.Info().Msg("run exists already (redelivered event); nothing to do")
		return nil
	}
	log.Info().Str("mode", string(mode)).Str("branch", branch).Msg("run submitted")
	if req.CommentID != 0 {
		b.react(ctx, client, owner, name, req.CommentID, "eyes")
	} else if _, _, err := client.Reactions.CreateIssueReaction(ctx, owner, name, req.Number, "eyes"); err != nil {
		log.Warn().Err(err).Msg("add reaction")
	}
	label := LabelRunning
	if mode == dispatch.ModePlan {
		label = LabelPlanning
	}
	b.setState(ctx, client, owner, name, req.Number, label)
	err = b.reply(ctx, client, owner, name, req.Number, "github/ack", AckData{
		TaskID: taskID, Mode: mode, Branch: branch, Budget: budget, Excluded: excluded.Commenters,
		IssueAuthorExcluded: excluded.IssueAuthor, Issue: req.Issue,
		Round: req.Round, Attempt: attempt, Harness: cfg.Harness, HasPlan: req.Plan != "",
		Marker: Marker{Kind: KindAck, TaskID: taskID, Mode: mode, Issue: req.Issue, Branch: branch, Round: req.Round, Attempt: attempt, Inline: req.Inline, Upto: req.FeedbackUpto}.String(),
	})
	if err != nil {
		log.Warn().Err(err).Msg("post acknowledgement")
	}
	b.Runs.Follow(spec.Meta)
	return nil
}

// taskText collects the issue's title and body and the comments of people
// who can write to the repo. Text from anyone else never reaches the agent:
// it is how a stranger would inject instructions. The title is text by the
// issue's author like the body: an outsider's issue reaches the agent as
// "Issue #N" only. excluded names whose text was left out so the
// acknowledgement can say so.
func (b *Base) taskText(ctx context.Context, client *github.Client, owner, repo string, number int) (dispatch.TaskText, excludedText, error) {
	var excluded excludedText
	issue, _, err := client.Issues.Get(ctx, owner, repo, number)
	if err != nil {
		return dispatch.TaskText{}, excluded, fmt.Errorf("read %s/%s#%d: %w", owner, repo, number, err)
	}
	writers := map[string]bool{}
	isWriter := func(login string) (bool, error) {
		if ok, seen := writers[login]; seen {
			return ok, nil
		}
		ok, err := b.canWrite(ctx, client, owner, repo, login)
		writers[login] = ok
		return ok, err
	}
	task := dispatch.TaskText{URL: issue.GetHTMLURL()}
	author := issue.GetUser().GetLogin()
	if ok, err := isWriter(author); err != nil {
		return task, excluded, err
	} else if ok {
		task.Title, task.Body = issue.GetTitle(), issue.GetBody()
	} else {
		task.Title = outsiderTitle(number)
		excluded.IssueAuthor = author
	}
	comments, err := listComments(ctx, client, owner, repo, number)
	if err != nil {
		return task, excluded, err
	}
	for _, c := range comments {
		login := c.GetUser().GetLogin()
		if isBotLogin(c.GetUser()) {
			continue
		}
		ok, err := isWriter(login)
		if err != nil {
			return task, excluded, err
		}
		if !ok {
			if login != excluded.IssueAuthor && !slices.Contains(excluded.Commenters, login) {
				excluded.Commenters = append(excluded.Commenters, login)
			}
			continue
		}
		task.Comments = append(task.Comments, dispatch.Comment{Author: login, Body: c.GetBody()})
	}
	return task, excluded, nil
}

// withTask adds the task id to the context's logger.
func withTask(ctx context.Context, taskID string) (context.Context, zerolog.Logger) {
	log := zerolog.Ctx(ctx).With().Str("task_id", taskID).Logger()
	return log.WithContext(ctx), log
}

// reply renders a github/ template and posts it as a comment.
func (b *core) reply(ctx context.Context, client *github.Client, owner, repo string, number int, tmpl string, data any) error {
	body, err := b.Templates.Render(tmpl, data)
	if err != nil {
		return err
	}
	body = strings.TrimSpace(body)
	if _, _, err := client.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("comment on %s/%s#%d: %w", owner, repo, number, err)
	}
	return nil
}

func (b *Base) react(ctx context.Context, client *github.Client, owner, repo string, commentID int64, content string) {
	if _, _, err := client.Reactions.CreateIssueCommentReaction(ctx, owner, repo, commentID, content); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("add reaction")
	}
}

// setState puts one state label on an issue or PR and removes the others.
func (b *core) setState(ctx context.Context, client *github.Client, owner, repo string, number int, label string) {
	log := zerolog.Ctx(ctx)
	issue, _, err := client.Issues.Get(ctx, owner, repo, number)
	if err != nil {
		log.Warn().Err(err).Msg("read labels")
		return
	}
	for _, l := range issue.Labels {
		if slices.Contains(stateLabels, l.GetName()) && l.GetName() != label {
			if _, err := client.Issues.RemoveLabelForIssue(ctx, owner, repo, number, l.GetName()); err != nil {
				log.Warn().Err(err).Str("label", l.GetName()).Msg("remove state label")
			}
		}
	}
	if label != "" {
		if _, _, err := client.Issues.AddLabelsToIssue(ctx, owner, repo, number, []string{label}); err != nil {
			log.Warn().Err(err).Str("label", label).Msg("add state label")
		}
	}
}

// stateOf returns the state label an issue carries, or "".
func stateOf(labels []*github.Label) string {
	for _, l := range labels {
		if slices.Contains(stateLabels, l.GetName()) {
			return l.GetName()
		}
	}
	return ""
}
