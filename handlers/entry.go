package handlers

import (
	"context"
	"errors"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Delivery is where a webhook's event happened and who acted, as an
// adapter (handlers/webhook) read it from the payload. The engine opens
// the GitHub seam on it.
type Delivery struct {
	// ID is the delivery's id (X-GitHub-Delivery).
	ID           string
	Installation int64
	// Repo is the event's repository; a push's leaves out some fields,
	// which a run reads afresh when it needs them.
	Repo   *github.Repository
	Number int
	IsPR   bool
	Sender string
	// CommentID is the comment (or check run) that asked, 0 for none.
	CommentID int64
	// Issue and PR are the issue or pull request as the payload shows
	// them, when it brings them: what a writer vouches for is the issue
	// as the event saw it (vouch.go).
	Issue *github.Issue
	PR    *github.PullRequest
}

// Entry is the engine's door: what the webhook adapters hand it, one
// method per thing a webhook asks, and the cheap tests they filter
// deliveries with before decoding them. Every method that acts goes
// through the table (Base.on) or one of the engine's parts.
type Entry struct{ b *Base }

// Entry is the engine's door for the webhook adapters.
func (b *Base) Entry() *Entry { return &Entry{b: b} }

// open is the thread d names, through the seam.
func (e *Entry) open(d Delivery) (thread, error) {
	t, err := e.b.thread(d.Installation, d.Repo, d.Number, d.IsPR)
	if err != nil {
		return thread{}, err
	}
	t.sender, t.deliveryID, t.commentID, t.issue, t.pr = d.Sender, d.ID, d.CommentID, d.Issue, d.PR
	return t, nil
}

// act hands the table ev on the thread d names.
func (e *Entry) act(ctx context.Context, d Delivery, ev event) error {
	t, err := e.open(d)
	if err != nil {
		return err
	}
	_, err = e.b.on(ctx, t, ev)
	return err
}

// Label is a writer's trigger label on an issue: a plan run.
func (e *Entry) Label(ctx context.Context, d Delivery) error {
	return e.act(ctx, d, event{kind: lifecycle.Label, trigger: d.ID, tried: "label this issue `" + e.b.TriggerLabel + "`"})
}

// Comment is a comment created on an issue or pull request: a command, or
// a mention of the App (mention.go), or nothing.
func (e *Entry) Comment(ctx context.Context, d Delivery, body string) error {
	t, err := e.open(d)
	if err != nil {
		return err
	}
	cmd, perr := commands.ParseCommand(body)
	if cmd == nil && perr == nil {
		return e.b.mention(ctx, t, body)
	}
	_, err = e.b.on(ctx, t, commandEvent(cmd, perr, commentTrigger(d.CommentID)))
	return err
}

// Feedback is what a person wrote on a pull request in a review (its
// body, an inline comment): a command other than /revise is that command,
// and the rest is feedback for the review batch (batch.go). trigger is
// what the task id derives from ("review-N", "inline-N"); reviewThread is
// the review thread an inline comment is in (its first comment's id; 0
// for a review's body).
func (e *Entry) Feedback(ctx context.Context, d Delivery, body, trigger string, reviewThread int64) error {
	ev := event{kind: lifecycle.Review, trigger: trigger}
	if cmd, perr := commands.ParseCommand(body); perr != nil || cmd != nil {
		ev = commandEvent(cmd, perr, trigger)
	}
	ev.thread = reviewThread
	return e.act(ctx, d, ev)
}

// Opened is a person's pull request opened or made ready for review
// (d.PR): it is reviewed when the base branch's .sandbox.yml asks for it
// (review.auto) and its author can write to the repository. The event is
// /review's, asked for by the author, once per head.
func (e *Entry) Opened(ctx context.Context, d Delivery) error {
	t, err := e.open(d)
	if err != nil {
		return err
	}
	cfg, err := e.b.c.loadConfig(ctx, d.Installation, t.gh, d.PR.GetBase().GetRef(), sandboxcfg.Flags{})
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) || err == nil && !cfg.Review.Auto {
		return nil // an invalid configuration is reported where a person asks
	}
	if err != nil {
		return err
	}
	if ok, err := e.b.c.canWrite(ctx, t.gh, d.Sender); err != nil || !ok {
		if err == nil {
			zerolog.Ctx(ctx).Info().Str("author", d.Sender).Msg("review.auto: the pull request's author cannot write here; no review unless a writer asks")
		}
		return err
	}
	_, err = e.b.on(ctx, t, event{kind: lifecycle.AskReview, trigger: "head-" + d.PR.GetHead().GetSHA()})
	return err
}

// Closed is a pull request merged or closed (d.PR): when it is the App's
// and several attempts competed for it (/approve --attempts N), the
// attempts' own branches are deleted.
func (e *Entry) Closed(ctx context.Context, d Delivery) error {
	return e.b.sets.dropBranches(ctx, d)
}

// Rerun is a writer's "Re-run" on the check run whose external id is
// externalID: the run it shows, again (/retry, or /rebase for a rebase
// run). A check run that is not a run's is left alone.
func (e *Entry) Rerun(ctx context.Context, d Delivery, externalID string) error {
	number, mode, ok := follow.ParseExternalID(externalID)
	if !ok {
		return nil
	}
	ctx, _ = githubapp.PreparePRContext(ctx, d.Installation, d.Repo, number)
	cmd := &commands.Command{Name: "retry"}
	if mode == dispatch.ModeRebase {
		cmd.Name = "rebase"
	}
	d.Number = number
	t, err := e.open(d)
	if err != nil {
		return err
	}
	issue, err := t.gh.Issue(ctx, number)
	if err != nil {
		return err
	}
	t.isPR = issue.IsPullRequest()
	_, err = e.b.on(ctx, t, commandEvent(cmd, nil, commentTrigger(d.CommentID)))
	return err
}

// ChecksChanged is a change in the checks of sha, the head of branch: each
// open PR of the App's whose head it is (those numbered, or those from
// branch) has its checks read, and a failure fixed (ci.go).
func (e *Entry) ChecksChanged(ctx context.Context, d Delivery, sha, branch string, numbers []int) error {
	return e.b.ci.headChanged(ctx, d.Installation, d.Repo, sha, branch, numbers, d.ID)
}

// MainChecks is a change in the checks of sha on the default branch: its
// on: main_ci_failed routines (routines_ci.go).
func (e *Entry) MainChecks(ctx context.Context, d Delivery, sha string) error {
	return e.b.Routines.mainChecks(ctx, d.Installation, d.Repo, sha)
}

// Pushed is a push of after to branch (not one of the App's): the App's
// pull requests on it are brought up to date (rebase.go), and on the
// default branch the routines its .sandbox.yml declares are read again.
func (e *Entry) Pushed(ctx context.Context, d Delivery, branch, after string) error {
	log := zerolog.Ctx(ctx)
	if branch == d.Repo.GetDefaultBranch() {
		if err := e.b.Routines.cat.pushed(ctx, d.Installation, d.Repo, after); err != nil {
			log.Warn().Err(err).Msg("routines: read the routines at the new head")
		}
	}
	gh, err := e.b.c.Hub.Repo(d.Installation, d.Repo.GetFullName())
	if err != nil {
		return err
	}
	prs, err := gh.OpenPullRequests(ctx, "", branch)
	if err != nil {
		return err
	}
	for _, pr := range prs {
		// Only PRs this App opened from the base repository are ours (the
		// table): a fork's agent/... branch with a copied marker, or a
		// person's PR on an agent/ branch, gets neither an update nor a
		// sandbox.
		t := thread{gh: gh, installation: d.Installation, repo: d.Repo, number: pr.GetNumber(), isPR: true, pr: pr,
			sender: d.Sender, deliveryID: d.ID}
		if _, err := e.b.on(ctx, t, event{kind: lifecycle.Push, trigger: "push-" + after}); err != nil {
			log.Error().Err(err).Int("pr", pr.GetNumber()).Msg("update agent PR")
		}
	}
	return nil
}

// Installed is the App given repos of an installation (installed,
// unsuspended, or repositories added): their labels, their routines.
func (e *Entry) Installed(ctx context.Context, installation int64, repos []*github.Repository) error {
	return e.b.installs.setUpRepos(ctx, installation, repos)
}

// Removed is the App taken from repos of an installation: their runs
// stop.
func (e *Entry) Removed(ctx context.Context, installation int64, repos []*github.Repository) error {
	removed := map[string]bool{}
	for _, r := range repos {
		removed[r.GetFullName()] = true
	}
	return e.b.installs.stopRuns(ctx, func(id int64, repo string) bool { return id == installation && removed[repo] })
}

// Uninstalled is the App removed from (or suspended on) an installation:
// all its runs there stop.
func (e *Entry) Uninstalled(ctx context.Context, installation int64) error {
	return e.b.installs.stopRuns(ctx, func(id int64, _ string) bool { return id == installation })
}

// IgnoredSender reports whether what u does is ignored: bots (the App
// itself included) unless the settings allow them (trust.go).
func (e *Entry) IgnoredSender(u *github.User) bool { return e.b.gate.isIgnoredSender(u) }

// MayAddress is the cheap test of a comment's body before it is decoded:
// a command needs a "/", a mention the App's "@slug" (mention.go).
func (e *Entry) MayAddress(body []byte) bool { return e.b.mayAddress(body) }

// OwnApp reports whether slug is this App's (its own check suite is a
// run's progress, never CI to fix). Before the App's identity is known
// nothing is.
func (e *Entry) OwnApp(slug string) bool {
	own := e.b.c.slug()
	return own != "" && strings.EqualFold(slug, own)
}

// TriggerLabel is the label that starts a plan.
func (e *Entry) TriggerLabel() string { return e.b.TriggerLabel }

// CheckName is the name of the check run that shows a run's progress.
func (e *Entry) CheckName() string { return e.b.CheckName }
