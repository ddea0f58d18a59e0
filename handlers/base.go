// Package handlers holds one type per GitHub webhook event, the comment
// command parser, the permission checks, and Runs, which follows each run the
// bot started until its result is on GitHub.
//
// The bot keeps no database: what it must remember lives on GitHub (labels
// and comments with hidden markers) and in the backend (runs, their
// metadata, the per-issue lock).
package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/appconfig"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Settings are the parts of the server configuration handlers act on.
type Settings struct {
	TriggerLabel  string
	AllowUsers    []string
	AllowTeams    []string // org/team
	AllowBots     []string
	MaxContinues  int
	MaxPlanRounds int
	// ProgressInterval throttles check-run and progress-comment updates.
	ProgressInterval time.Duration
	// TokenRefresh is how often a live run's token is replaced (tokens last
	// an hour).
	TokenRefresh time.Duration
	Defaults     sandboxcfg.Config
	Limits       sandboxcfg.Limits
	Isolation    dispatch.Isolation
	// CheckName is the check run that shows a run's progress.
	CheckName string
	// SecretEnv names the variables the backend passes to every sandbox;
	// the runner redacts their values.
	SecretEnv []string
	// DispatchDeadline bounds the retries of a submission that failed for
	// a passing reason.
	DispatchDeadline time.Duration
	// ReviewBatchWindow is how long review feedback on an agent PR is
	// collected into one revise run (batch.go).
	ReviewBatchWindow time.Duration
	// ResultRetry is the first wait before posting a refused result again.
	ResultRetry time.Duration
	// WebURL is GitHub's web address (https://github.com, or GHES's), for
	// permanent media links.
	WebURL string
	// Caps bound concurrent runs; a run over one waits in the queue
	// (queue.go). The zero value queues nothing.
	Caps dispatch.Caps
	// ArtifactCaps bound the task artifacts the bot stores (artifacts.go).
	ArtifactCaps dispatch.ArtifactCaps
}

// core is what the handlers and the run follower share: the client
// creator, settings, backend, templates, the App's identity and the
// secrets to redact. Runs holds it and a start function, not Base, so the
// follower depends on what it uses rather than on every handler.
type core struct {
	githubapp.ClientCreator
	Settings
	Backend   dispatch.Backend
	Templates *templates.Set
	Loader    *appconfig.Loader
	Now       func() time.Time
	trust     *trustState
	board     *runBoard // what this replica saw of its runs, for /status
	// Secrets are redacted from everything the bot posts.
	Secrets *Secrets

	// Receipts keeps every ended run's receipt (receipts.go).
	Receipts Receipts
	// QueueWait, when set, is told how long each queued run waited for
	// its slot (the wait-time metric).
	QueueWait func(time.Duration)

	batches *batches // review feedback waiting for its revise run (batch.go)
}

// Base is shared by every handler: the core and the run follower.
type Base struct {
	*core
	Runs *Runs
}

// NewBase wires a Base and its Runs. The settings come defaulted from the
// server configuration (app.Config owns every default); an unset one is an
// error naming it.
func NewBase(cc githubapp.ClientCreator, s Settings, backend dispatch.Backend, tmpl *templates.Set) (*Base, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	b := &Base{core: &core{
		ClientCreator: cc,
		Settings:      s,
		Backend:       backend,
		Templates:     tmpl,
		Loader:        newConfigLoader(),
		Now:           time.Now,
		trust:         newTrustState(),
		board:         newRunBoard(s.WebURL),
		Secrets:       NewSecrets(),
	}}
	b.Runs = newRuns(b.core, b.start)
	b.Runs.onEnd, b.Runs.onReconcile = b.freeSlot, b.admitAndStart
	b.batches = newBatches(b)
	return b, nil
}

// Handlers returns one handler per event the app subscribes to.
func (b *Base) Handlers() []githubapp.EventHandler {
	return []githubapp.EventHandler{
		&Issues{b}, &IssueComment{b}, &PullRequestReview{b}, &PullRequestReviewComment{b},
		&Push{b}, &Installation{b}, &InstallationRepositories{b}, &CheckRun{b},
	}
}

// State labels shown on issues and PRs.
const (
	LabelPlanning         = "agent:planning"
	LabelAwaitingApproval = "agent:awaiting-approval"
	LabelRunning          = "agent:running"
	LabelDone             = "agent:done"
	LabelFailed           = "agent:failed"
	// LabelQueued: the run waits for a slot under the server's caps.
	LabelQueued = "agent:queued"
)

var stateLabels = []string{LabelPlanning, LabelAwaitingApproval, LabelRunning, LabelDone, LabelFailed, LabelQueued}

// labelColors are what installation events create labels with.
func (b *Base) labelSet() map[string]string {
	return map[string]string{
		b.TriggerLabel:        "5319e7",
		LabelPlanning:         "c5def5",
		LabelAwaitingApproval: "fbca04",
		LabelRunning:          "1d76db",
		LabelDone:             "0e8a16",
		LabelFailed:           "b60205",
		LabelQueued:           "ededed",
	}
}

// isIgnoredSender is true for bots (the app itself included) unless the
// operator allowed them.
func (b *Base) isIgnoredSender(u *github.User) bool {
	if u == nil {
		return true
	}
	if u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]") {
		return !slices.Contains(b.AllowBots, u.GetLogin())
	}
	return false
}

// fetchCanWrite reports whether login may drive the bot on repo: write,
// maintain or admin permission, or a place on the operator's allowlist.
func (b *Base) fetchCanWrite(ctx context.Context, client *github.Client, owner, repo, login string) (bool, error) {
	if slices.Contains(b.AllowUsers, login) {
		return true, nil
	}
	perm, _, err := client.Repositories.GetPermissionLevel(ctx, owner, repo, login)
	if err != nil {
		return false, fmt.Errorf("read %s's permission on %s/%s: %w", login, owner, repo, err)
	}
	// GitHub reports maintain as "write" in this legacy field.
	switch perm.GetPermission() {
	case "admin", "maintain", "write":
		return true, nil
	}
	for _, team := range b.AllowTeams {
		org, slug, _ := strings.Cut(team, "/")
		m, resp, err := client.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusNotFound {
				continue
			}
			return false, fmt.Errorf("read %s's membership of %s: %w", login, team, err)
		}
		if m.GetState() == "active" {
			return true, nil
		}
	}
	return false, nil
}
