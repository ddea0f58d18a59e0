// Package runner is the pipeline that runs inside the sandbox: it takes a
// work order, checks the repository out, resolves the environment, runs
// setup, drives the agent through a harness under a watchdog and a budget,
// validates with repair rounds, commits and pushes (periodically, at
// milestones and on SIGTERM) and always leaves result.json behind.
package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Options are the runner's surroundings; the zero value works inside the
// sandbox (everything comes from the environment and defaults).
type Options struct {
	// Templates are the prompts; nil means the embedded ones.
	Templates *templates.Set
	// Harness replaces the one the configuration names (tests, embedding).
	Harness harness.Harness
	// Bins locate the agent CLIs for the configured harness.
	Bins harness.Bins
	// Environ is the base environment of setup, agent and checks; nil
	// means os.Environ().
	Environ []string
	// Progress receives one JSON line per meaningful step (stdout).
	Progress io.Writer
	// Log receives the runner's zerolog output (stderr); nil discards.
	Log io.Writer
	// WorkDir holds the checkout (WorkDir/repo); empty means a temporary
	// directory removed at the end.
	WorkDir string
	// StateDir keeps what outlives one runner process: the agent session
	// (plan revisions continue it), the runner's git configuration. Empty
	// means WorkDir/state.
	StateDir string
	// ServicesFile is the JSON map of service addresses ($SANDBOX_SERVICES_FILE).
	ServicesFile string
	// EnvFile is the CLI's --env-file, the last environment layer.
	EnvFile string
	// PushInterval is how often work in progress is pushed (default 3m).
	PushInterval time.Duration
	// KillGrace is how long a stopped agent gets between SIGTERM and
	// SIGKILL (default 10s).
	KillGrace time.Duration
	// StartupGrace is how long the agent may take to print its first event
	// (default: the inactivity timeout).
	StartupGrace time.Duration
	// FinalPushTimeout bounds the push after an interruption, within the
	// sandbox's kill grace period (default 60s).
	FinalPushTimeout time.Duration
	// Timeout, when set, replaces the work order's timeout_minutes (the
	// CLI's --timeout, which takes finer units than minutes).
	Timeout time.Duration
	// Chromium and FFmpeg capture media of the dev server; empty means
	// found on PATH (media is skipped, with a warning, without Chromium).
	Chromium, FFmpeg string
	// MediaFileCap and MediaRunCap bound one media file and all of a
	// run's media in bytes (defaults 5 MiB and 20 MiB); what does not fit
	// is left out with a note in the receipt.
	MediaFileCap, MediaRunCap int64
	// Agent is the user the agent and everything it starts run as; nil is
	// the runner's own (no second uid outside a sandbox).
	Agent *AgentUser
	// GitName and GitEmail are the commit identity.
	GitName, GitEmail string
	// SetupCacheDir is the repository's setup cache, the runner's alone
	// ($SANDBOX_SETUP_CACHE_DIR); empty, setup always runs.
	SetupCacheDir string
	// SetupCacheMaxBytes bounds it (least recently used entries go first).
	SetupCacheMaxBytes int64
	// StartTimings is the sandbox init's timings file ($SANDBOX_START_TIMINGS).
	StartTimings string
	// OSVDir is the operator's offline OSV database ($SANDBOX_OSV_DIR);
	// empty, dependency changes are listed without advisories.
	OSVDir string
}

func (o *Options) defaults() {
	if o.Templates == nil {
		o.Templates = templates.MustLoadEmbedded()
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.PushInterval <= 0 {
		o.PushInterval = 3 * time.Minute
	}
	if o.KillGrace <= 0 {
		o.KillGrace = 10 * time.Second
	}
	if o.FinalPushTimeout <= 0 {
		o.FinalPushTimeout = 60 * time.Second
	}
	if o.GitName == "" {
		o.GitName = "sandbox-bot"
	}
	if o.GitEmail == "" {
		o.GitEmail = "sandbox-bot@users.noreply.github.com"
	}
}

// statusError ends a run with a status other than failed, or with failed
// and a diagnostic.
type statusError struct {
	status dispatch.Status
	msg    string
	diag   *dispatch.Diagnostic
}

func (e *statusError) Error() string { return e.msg }

func failed(format string, args ...any) error {
	return &statusError{status: dispatch.StatusFailed, msg: fmt.Sprintf(format, args...)}
}

type run struct {
	order dispatch.WorkOrder
	spec  modeSpec // what the order's mode does
	cfg   sandboxcfg.Resolved
	opts  Options
	start time.Time
	log   zerolog.Logger
	red   *Redactor
	prog  *reporter
	res   *dispatch.Result
	tl    timeline

	parent context.Context // ends on SIGTERM
	work   context.Context // parent plus timeout_minutes

	// ws is where the run works, as the checkout stage made it
	// (checkout.go).
	ws *workspace
	h  harness.Harness

	// ag runs the agent's passes, once the checkout is set up (invoke.go).
	ag *agentDriver

	// br is the run's branch on the remote, once checked out (push.go).
	br *branch

	checks     map[string]*dispatch.CheckResult
	checkOrder []string

	// The checks before the PR, each built once the checkout knows its
	// base; nil where the run makes none (prchecks.go).
	sec   *secretGate // the secret scan before pushes (prsecrets.go)
	deps  *depCheck   // the dependency report and advisories (prdeps.go)
	scope *scopeCheck // the change against the approved plan (planscope.go)
	// reasons are the agent's reasons for files outside the approved
	// plan, from its "Outside the approved plan" sections.
	reasons map[string]string
	// images are the work order's images on their way to the agent,
	// once the harness is chosen (images.go).
	images *imageSet
}

// workspace is where a run works, made by the checkout stage
// (checkout.go): its directories, the checkout and the commits it started
// from, the environment the agent and everything it starts get, the
// services, the agent's browser. Set before the agent starts, read after.
type workspace struct {
	workDir, stateDir string
	privDir           string // the runner's alone (0700): credential helper
	dir               string // the agent's working directory
	tempWork          bool
	git               *Git // nil: no repository (task, preview)
	env               []string
	services          dispatch.Services
	browser           *browser    // nil: the agent has no browser
	cast              *screencast // nil: its browser is not cast

	baseBranch string
	baseSHA    string // origin/<base> at clone time
	startSHA   string // HEAD when the agent started
	pushes     bool   // spec.pushes, once the checkout is there
	// pushedAtStart is the target branch's commit on the remote when the
	// run started, "" when the branch is new.
	pushedAtStart string
}

// Run executes order and returns its receipt, which it has also written to
// order.OutputDir. It never panics on bad input and always returns a
// result: a run that could not even start is a failed receipt saying why.
// Cancelling ctx (SIGTERM) stops the agent, pushes what was done and ends
// the run as interrupted.
func Run(ctx context.Context, order dispatch.WorkOrder, opts Options) *dispatch.Result {
	opts.defaults()
	r := &run{
		order: order,
		opts:  opts,
		start: time.Now(),
		res: &dispatch.Result{
			TaskID: order.TaskID,
			Mode:   order.Mode,
			Branch: order.TargetBranch,
		},
		parent:  ctx,
		ws:      &workspace{},
		checks:  map[string]*dispatch.CheckResult{},
		reasons: map[string]string{},
	}
	r.red = NewRedactor(order.TokenFile, secretValues(opts.Environ, order.SecretEnv)...)
	logger := zerolog.New(r.red.Writer(opts.Log)).With().Timestamp().Str("task_id", order.TaskID).Str("mode", string(order.Mode))
	if order.Repo != "" {
		logger = logger.Str("repo", order.Repo)
	}
	if order.Number != 0 {
		logger = logger.Int("issue", order.Number)
	}
	r.log = logger.Logger()
	r.prog = &reporter{w: opts.Progress, taskID: order.TaskID, red: r.red}

	err := r.exec()
	r.finish(err)
	return r.res
}

func secretValues(env []string, names []string) []string {
	var vals []string
	for _, n := range names {
		if v, ok := lookupEnv(env, n); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

func (r *run) exec() error {
	if err := r.order.Validate(); err != nil {
		return err
	}
	spec, ok := modes[r.order.Mode]
	if !ok {
		return fmt.Errorf("mode %q has no pipeline", r.order.Mode)
	}
	if r.order.CI != nil {
		// A CI fix is a revise whose feedback is the failing checks.
		spec.prompt, spec.subject = PromptCIFix, "Fix failing checks: "
	}
	r.spec = spec
	r.cfg = r.order.Config
	defer func() { r.images.remove() }()
	if err := r.cfg.Check(); err != nil {
		return fmt.Errorf("work order config: %w", err)
	}
	budget := r.order.BudgetUSD
	if budget <= 0 {
		budget = r.cfg.MaxBudgetUSD
	}
	timeout := time.Duration(r.order.TimeoutMinutes) * time.Minute
	if timeout <= 0 {
		timeout = time.Duration(r.cfg.TimeoutMinutes) * time.Minute
	}
	if r.opts.Timeout > 0 {
		timeout = r.opts.Timeout
	}
	var cancel context.CancelFunc
	r.work, cancel = context.WithTimeout(r.parent, timeout)
	defer cancel()
	r.log.Info().Float64("budget_usd", budget).Float64("repair_budget_usd", r.cfg.RepairBudget(budget)).Dur("timeout", timeout).Str("harness", r.cfg.Harness).Msg("run started")
	if err := r.ready(); err != nil {
		return err
	}
	r.ag = r.agentDriver(budget)
	switch r.spec.pipeline {
	case pipePlan:
		return r.plan()
	case pipeImplement:
		return r.implement()
	case pipeRebase:
		return r.rebase()
	case pipeTask:
		return r.task()
	case pipePreview:
		return r.preview()
	case pipeReview:
		return r.reviewPR()
	}
	return fmt.Errorf("mode %q has no pipeline", r.order.Mode)
}

// ready makes everything the agent's first pass needs, in order: the
// directories, the browser (whose MCP server the harness is built with),
// the harness, the services, the checkout, the environment, setup, and the
// branch with its checks before the PR.
func (r *run) ready() error {
	co := &checkout{ws: r.ws, order: r.order, spec: r.spec, cfg: &r.cfg, opts: r.opts, work: r.work, parent: r.parent,
		res: r.res, tl: &r.tl, red: r.red, log: r.log, prog: r.prog}
	if err := co.dirs(); err != nil {
		return err
	}
	if err := co.setupBrowser(); err != nil {
		return err
	}
	if r.opts.Harness != nil {
		r.h = r.opts.Harness
	} else {
		h, err := harness.ByName(r.cfg, r.opts.Bins)
		if err != nil {
			return err
		}
		r.h = h
	}
	r.images = &imageSet{order: r.order.Images, h: r.h, res: r.res, red: r.red, log: r.log}
	if r.opts.ServicesFile != "" {
		s, err := ReadServices(r.opts.ServicesFile)
		if err != nil {
			return err
		}
		r.ws.services = s
	}
	if err := r.tl.timed("clone", co.prepare); err != nil {
		return err
	}
	if r.ws.git != nil {
		r.buildChecks(r.ws.git, r.ws.pushedAtStart)
	}
	if err := co.resolveEnv(); err != nil {
		return err
	}
	return co.setup()
}
