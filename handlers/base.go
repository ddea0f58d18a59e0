// Package handlers is the bot's engine: it turns what GitHub's webhooks
// say into what the bot does. The adapters (handlers/webhook) decode each
// webhook and hand it to the engine's door, Entry, which makes it an event
// of the lifecycle table (handlers/lifecycle); on (act.go) checks who
// asked, observes the issue or pull request (observe.go), asks the table
// and performs what it says. The follower (handlers/follow) follows each
// run to its end and hands the end back (runEnds, runs.go), which puts the
// result on GitHub as the table's run rows say. Every call to GitHub goes
// through the seam, package hub.
//
// The bot keeps no database: what it must remember lives on GitHub (labels
// and comments with hidden markers, handlers/markers) and in the backend (runs, their
// metadata, the per-issue lock, the run queue).
package handlers

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Settings are the parts of the server configuration handlers act on. The
// server's configuration embeds them (app.Config), so the yaml names are
// the configuration file's keys; fields without one are worked out from
// other settings when the configuration is loaded.
type Settings struct {
	// TriggerLabel is the label that starts a plan.
	TriggerLabel string `yaml:"trigger_label"`
	// AllowUsers (logins) and AllowTeams ("org/team") may drive the bot
	// without write permission.
	AllowUsers []string `yaml:"allow_users"`
	AllowTeams []string `yaml:"allow_teams"` // org/team
	// AllowBots are the bot accounts ("name[bot]") whose events the
	// handlers act on; every other bot, the App itself included, is
	// ignored.
	AllowBots []string `yaml:"allow_bots"`
	// MaxContinues bounds the automatic continue runs after an
	// interruption.
	MaxContinues int `yaml:"max_continues"`
	// MaxPlanRounds bounds the plans of one issue (/revise rounds).
	MaxPlanRounds int `yaml:"max_plan_rounds"`
	// ProgressInterval throttles check-run and progress-comment updates.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// TokenRefresh is how often a live run's token is replaced (tokens last
	// an hour).
	TokenRefresh time.Duration `yaml:"token_refresh"`
	// Defaults is a .sandbox.yml beneath every repository's (and the
	// organisation's): docs/sandbox-yml.md has its keys.
	Defaults sandboxcfg.Config `yaml:"defaults"`
	// Limits bound what a repository's .sandbox.yml and one-off flags
	// may ask for.
	Limits sandboxcfg.Limits `yaml:"limits"`
	// Isolation is the sandbox's profile: privileged, caps (hosts that
	// refuse privileged containers) or gvisor (caps on gVisor's runsc).
	Isolation dispatch.Isolation `yaml:"isolation"`
	// CheckName is the check run that shows a run's progress.
	CheckName string `yaml:"-"`
	// SecretEnv names the variables the backend passes to every sandbox;
	// the runner redacts their values.
	SecretEnv []string `yaml:"-"`
	// DispatchDeadline bounds the retries of a submission that failed for
	// a passing reason.
	DispatchDeadline time.Duration `yaml:"dispatch_deadline"`
	// ReviewBatchWindow is how long review feedback on an agent PR is
	// collected into one revise run (batch.go).
	ReviewBatchWindow time.Duration `yaml:"review_batch_window"`
	// PreviewDuration is how long a /preview serves the PR's head.
	PreviewDuration time.Duration `yaml:"preview_duration"`
	// ResultRetry is the first wait before posting a refused result again.
	ResultRetry time.Duration `yaml:"result_retry"`
	// WebURL is GitHub's web address (https://github.com, or GHES's), for
	// permanent media links.
	WebURL string `yaml:"-"`
	// Caps bound concurrent runs; a run over one waits in the queue
	// (queue.go). The zero value queues nothing.
	Caps dispatch.Caps `yaml:"caps"`
	// ArtifactCaps bound the task artifacts the bot stores (artifacts.go).
	ArtifactCaps dispatch.ArtifactCaps `yaml:"-"`
	// Images bound the pictures a run is given and say where the bot
	// fetches them (images.go).
	Images ImageSettings `yaml:"-"`
	// Budgets are the server's monthly budgets (budget.go): a run is
	// admitted only when its budget fits what is left of the month.
	Budgets budget.Policy `yaml:"-"`
	// CILogBytes bounds the log tail a CI fix run is given per failing
	// check (ci.go).
	CILogBytes int `yaml:"-"`
}

// Wiring is what the server hands the handlers: the way to GitHub,
// settings, backend, templates, the clocks, the secrets to redact, where
// receipts go, the budgets' ledger and the queue-wait metric. NewBase
// takes all of it at once; nothing is set on a Base after it is built.
type Wiring struct {
	// ClientCreator makes the go-github clients behind the seam (the
	// server wraps it in its rate limiter).
	ClientCreator githubapp.ClientCreator
	// Hub is the seam to GitHub; nil: go-github over ClientCreator
	// (hub.New). The lifecycle table's tests put GitHub in memory here.
	Hub hub.Hub
	Settings
	Backend   dispatch.Backend
	Templates *templates.Set
	// Now is the handlers' clock; nil: time.Now.
	Now func() time.Time
	// AfterFunc calls f after d on its own goroutine, and returns what
	// stops it; the queue's claim watch waits with it. nil: the system
	// clock's.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// RoutinesNow and RoutinesAfterFunc are the routines' scheduler's
	// clock (a test's, SANDBOX_CLOCK_FILE); nil: Now and AfterFunc.
	RoutinesNow       func() time.Time
	RoutinesAfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Secrets are redacted from everything the bot posts; nil: none yet.
	Secrets *sanitize.Secrets
	// Logger is what the run followers log with.
	Logger zerolog.Logger

	// Receipts keeps every ended run's receipt (receipts.go).
	Receipts Receipts
	// Budget is where runs reserve and settle their budgets (budget.go);
	// nil keeps no budgets.
	Budget budget.Ledger
	// QueueWait, when set, is told how long each queued run waited for
	// its slot (the wait-time metric).
	QueueWait func(time.Duration)
}

// defaulted is w with its unset clocks, secrets and seam filled in.
func defaulted(w Wiring) Wiring {
	if w.Now == nil {
		w.Now = time.Now
	}
	if w.AfterFunc == nil {
		w.AfterFunc = afterFunc
	}
	if w.RoutinesNow == nil {
		w.RoutinesNow = w.Now
	}
	if w.RoutinesAfterFunc == nil {
		w.RoutinesAfterFunc = w.AfterFunc
	}
	if w.Secrets == nil {
		w.Secrets = sanitize.NewSecrets()
	}
	if w.Hub == nil {
		w.Hub = hub.New(w.ClientCreator)
	}
	return w
}

// core is what the handlers and the run follower share: the Wiring, the
// seam to GitHub and what this replica remembers.
type core struct {
	*Wiring
	// retryWait is the first wait before a label write is tried again.
	retryWait time.Duration
	trust     *trustState
	// imageClient fetches images from GitHub's hosts without a
	// credential (imagefetch.go).
	imageClient *http.Client
	// ciForks counts the check runs of other repositories' heads (forks'
	// pull requests) the CI-fix path left out (ci_checks.go).
	ciForks atomic.Int64
}

// Base is the event router: the webhook handlers hand it their events,
// and it performs what the lifecycle table says (act.go), through one
// part per stage of a run's life. It holds the core as a field, not
// embedded, so what the core does is not Base's.
type Base struct {
	*Wiring
	c *core
	// gate says who may act (trust.go).
	gate *gatekeeper
	// ci answers the App's PRs' failing checks (ci.go, ci_checks.go).
	ci *ciFixer
	// replies answer /status and the table's replies that start nothing
	// (status.go, state.go).
	replies *stateReplies
	// aborts stops a run a person asked to stop (abort.go).
	aborts *aborter
	// installs sets repositories up and stops their runs when the App is
	// removed (installer.go).
	installs *installer
	starts   *starter
	// batches are review feedback waiting for its revise run (batch.go).
	batches *batches
	// Routines start work on a schedule or when a default branch goes red
	// (routines.go); the server starts and stops them.
	Routines *Routines
	// Runs follows every run to its end (handlers/follow).
	Runs *follow.Runs
	// sets are the approvals of several attempts (attempts.go).
	sets *attemptSets
	// ends are what the engine does when a followed run ends (runs.go).
	ends *runEnds
}

// NewBase builds a Base and every part of a run's life from w. The
// settings come defaulted from the server configuration (app.Config owns
// every default); an unset one is an error naming it.
//
// The parts hand work to each other both ways (the starter's runs are
// followed, a followed run's end frees the starter's slot; the engine
// starts CI fixes and routines' plans, which come back to the engine), so
// those that close a circle are allocated first and built once, here,
// each with what it uses.
func NewBase(w Wiring) (*Base, error) {
	if err := w.Settings.check(); err != nil {
		return nil, err
	}
	w = defaulted(w)
	c := &core{
		Wiring:      &w,
		retryWait:   200 * time.Millisecond,
		trust:       newTrustState(),
		imageClient: newImageClient(w.Images),
	}
	b, s, ends := new(Base), new(starter), new(runEnds)
	ci := &ciFixer{c: c, starts: s, on: b.on}
	bs := newBatches(c, s, ci)
	runs := follow.New(followDeps(&w), ends)
	keep := &resultKeeper{c: c, runs: runs}
	post := &resultPoster{c: c, starts: s, keep: keep, runs: runs}
	sets := &attemptSets{c: c, keep: keep, post: post, runs: runs, starts: s}
	*ends = runEnds{c: c, slots: s, post: post, keep: keep, sets: sets}
	*s = starter{c: c, runs: runs, sets: sets, agent: agentRun{c: c}, claims: &claimWatch{c: c, fire: admitLater(s)}}
	routines := newRoutines(c, routinePlan(b))
	*b = Base{Wiring: &w, c: c, gate: &gatekeeper{c: c}, ci: ci, starts: s, batches: bs, Routines: routines, Runs: runs, sets: sets, ends: ends,
		replies:  &stateReplies{c: c, routines: routines, runs: runs},
		aborts:   &aborter{c: c, runs: runs, sets: sets},
		installs: &installer{c: c, runs: runs, routines: routines},
	}
	return b, nil
}

// followDeps is what the run follower works with, from w.
func followDeps(w *Wiring) follow.Deps {
	return follow.Deps{Hub: w.Hub, Backend: w.Backend, Templates: w.Templates, Secrets: w.Secrets, Logger: w.Logger, Now: w.Now,
		Links: w.Receipts, CheckName: w.CheckName, ProgressInterval: w.ProgressInterval, TokenRefresh: w.TokenRefresh, WebURL: w.WebURL}
}

// LoadIdentity reads the App's bot account (core.LoadIdentity); the
// server calls it at start.
func (b *Base) LoadIdentity(ctx context.Context) (string, error) { return b.c.LoadIdentity(ctx) }

// ForkChecksIgnored is how many check runs of forks' heads the CI-fix path
// left out since the start (the metric sandbox_bot_ci_fork_checks_ignored_total).
func (b *Base) ForkChecksIgnored() int64 { return b.c.ciForks.Load() }
