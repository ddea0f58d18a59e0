// Package runner is the pipeline that runs inside the sandbox: it takes a
// work order, checks the repository out, resolves the environment, runs
// setup, drives the agent through a harness under a watchdog and a budget,
// validates with repair rounds, commits and pushes (periodically, at
// milestones and on SIGTERM) and always leaves result.json behind.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/media"
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
	// GitName and GitEmail are the commit identity.
	GitName, GitEmail string
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
	cfg   sandboxcfg.Config
	opts  Options
	start time.Time
	log   zerolog.Logger
	red   *Redactor
	prog  *reporter
	res   *dispatch.Result

	parent context.Context // ends on SIGTERM
	work   context.Context // parent plus timeout_minutes

	workDir, stateDir string
	dir               string // the agent's working directory
	tempWork          bool
	git               *Git
	h                 harness.Harness
	env               []string
	services          dispatch.Services

	baseBranch string
	baseSHA    string // origin/<base> at clone time
	startSHA   string // HEAD when the agent started
	lease      string // rebase: the remote branch before the force push
	pushes     bool

	session      string
	budget       float64
	repairBudget float64
	mainCost     float64
	repairCost   float64

	gitMu     sync.Mutex
	pushedSHA string

	checks     map[string]*dispatch.CheckResult
	checkOrder []string
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
		parent: ctx,
		checks: map[string]*dispatch.CheckResult{},
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
	r.cfg = r.order.Config
	r.cfg.ApplyDefaults()
	if err := r.cfg.Verify(); err != nil {
		return fmt.Errorf("work order config: %w", err)
	}
	r.budget = r.order.BudgetUSD
	if r.budget <= 0 {
		r.budget = r.cfg.MaxBudgetUSD
	}
	budgetCfg := r.cfg
	budgetCfg.MaxBudgetUSD = r.budget
	r.repairBudget = budgetCfg.RepairBudgetUSD()
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
	r.log.Info().Float64("budget_usd", r.budget).Float64("repair_budget_usd", r.repairBudget).Dur("timeout", timeout).Str("harness", r.cfg.Harness).Msg("run started")

	if err := r.dirs(); err != nil {
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
	if r.opts.ServicesFile != "" {
		s, err := ReadServices(r.opts.ServicesFile)
		if err != nil {
			return err
		}
		r.services = s
	}
	if err := r.prepare(); err != nil {
		return err
	}
	if err := r.resolveEnv(); err != nil {
		return err
	}
	if err := r.setup(); err != nil {
		return err
	}
	switch r.order.Mode {
	case dispatch.ModePlan:
		return r.plan()
	case dispatch.ModeExecute, dispatch.ModeContinue, dispatch.ModeRevise:
		return r.implement()
	case dispatch.ModeRebase:
		return r.rebase()
	case dispatch.ModeTask:
		return r.task()
	}
	return fmt.Errorf("mode %q has no pipeline", r.order.Mode)
}

func (r *run) dirs() error {
	r.workDir = r.opts.WorkDir
	if r.workDir == "" {
		d, err := os.MkdirTemp("", "sandbox-run-"+r.order.TaskID+"-")
		if err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
		r.workDir, r.tempWork = d, true
	}
	r.stateDir = r.opts.StateDir
	if r.stateDir == "" {
		r.stateDir = filepath.Join(r.workDir, "state")
	}
	for _, d := range []string{r.workDir, r.stateDir, r.order.OutputDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// prepare clones and checks out the branch the mode works on, or makes the
// artifacts directory in task mode.
func (r *run) prepare() error {
	if r.order.Mode == dispatch.ModeTask {
		r.dir = filepath.Join(r.order.OutputDir, "artifacts")
		return os.MkdirAll(r.dir, 0o755)
	}
	r.dir = filepath.Join(r.workDir, "repo")
	if err := os.RemoveAll(r.dir); err != nil {
		return err
	}
	g, err := gitSetup(r.stateDir, r.dir, r.opts.Environ, r.order.TokenFile, r.opts.GitName, r.opts.GitEmail, r.red)
	if err != nil {
		return err
	}
	r.git = g
	r.prog.emit(dispatch.Progress{Stage: "clone", Message: "cloning " + redactURL(r.order.CloneURL)})
	if err := g.Clone(r.work, r.order.CloneURL); err != nil {
		return err
	}
	def, err := g.DefaultBranch(r.work)
	if err != nil {
		return err
	}
	r.baseBranch = firstNonEmpty(r.order.BaseBranch, r.cfg.Branch, def)
	r.baseSHA, err = g.RevParse(r.work, "origin/"+r.baseBranch)
	if err != nil {
		return failed("base branch %q does not exist on the remote", r.baseBranch)
	}
	target := r.order.TargetBranch
	targetExists := false
	if target != "" {
		_, err := g.RevParse(r.work, "origin/"+target)
		targetExists = err == nil
	}
	switch r.order.Mode {
	case dispatch.ModePlan:
		err = g.Checkout(r.work, r.baseBranch, "origin/"+r.baseBranch)
	case dispatch.ModeExecute:
		if targetExists {
			// A rerun of the same task: build on what is there rather
			// than fail on a non-fast-forward push at the end.
			r.log.Warn().Str("branch", target).Msg("target branch exists already; continuing on it")
			err = g.Checkout(r.work, target, "origin/"+target)
		} else {
			err = g.Checkout(r.work, target, "origin/"+r.baseBranch)
		}
		r.pushes = true
	case dispatch.ModeContinue:
		if targetExists {
			err = g.Checkout(r.work, target, "origin/"+target)
		} else {
			r.log.Warn().Str("branch", target).Msg("nothing was pushed before the interruption; starting from the base branch")
			err = g.Checkout(r.work, target, "origin/"+r.baseBranch)
		}
		r.pushes = true
	case dispatch.ModeRevise, dispatch.ModeRebase:
		if !targetExists {
			return failed("branch %q does not exist on the remote; there is nothing to %s", target, r.order.Mode)
		}
		err = g.Checkout(r.work, target, "origin/"+target)
		r.pushes = true
	}
	if err != nil {
		return err
	}
	if r.startSHA, err = g.RevParse(r.work, "HEAD"); err != nil {
		return err
	}
	if targetExists {
		r.pushedSHA = r.startSHA
		r.lease = r.startSHA
	}
	// The sandbox writes resolved .env files into the checkout; they hold
	// secrets and must never be committed.
	if err := g.Exclude(".env", ".env.local"); err != nil {
		return err
	}
	r.res.Branch = target
	r.log.Info().Str("base", r.baseBranch).Str("branch", target).Str("head", r.startSHA).Msg("checked out")
	return nil
}

func (r *run) resolveEnv() error {
	secrets := map[string]string{}
	for _, n := range r.order.SecretEnv {
		if v, ok := lookupEnv(r.opts.Environ, n); ok {
			secrets[n] = v
		}
	}
	repoDir := ""
	if r.git != nil {
		repoDir = r.dir
	}
	res, err := ResolveEnv(EnvSources{YAML: r.cfg.Env, RepoDir: repoDir, Secrets: secrets, EnvFile: r.opts.EnvFile, Services: r.services})
	if err != nil {
		return err
	}
	for _, u := range res.Unresolved {
		r.log.Warn().Msg("env " + u)
	}
	base := r.opts.Environ
	if r.git != nil {
		base = r.git.Env()
	}
	r.env, err = openCodeConfigEnv(mergeEnv(base, res.Vars), r.stateDir)
	return err
}

func (r *run) setup() error {
	for i, c := range r.cfg.Lifecycle.Setup {
		r.prog.emit(dispatch.Progress{Stage: "setup", Message: fmt.Sprintf("setup %d/%d: %s", i+1, len(r.cfg.Lifecycle.Setup), c)})
		out, _, err := shellRun(r.work, r.dir, r.env, c, 0, r.red)
		if r.work.Err() != nil {
			return r.work.Err()
		}
		if err != nil {
			return failed("lifecycle.setup[%d] `%s` failed: %v\n%s", i, c, err, out)
		}
	}
	return nil
}

func (r *run) promptData() PromptData {
	names := map[string]string{}
	for k, v := range r.services {
		names[k] = v
	}
	return PromptData{
		TaskID:       r.order.TaskID,
		Mode:         r.order.Mode,
		Repo:         r.order.Repo,
		Number:       r.order.Number,
		Task:         r.order.Task,
		Plan:         r.order.Plan,
		Feedback:     r.order.Feedback,
		BaseBranch:   r.baseBranch,
		TargetBranch: r.order.TargetBranch,
		WorkDir:      r.dir,
		Checks:       r.cfg.Validate,
		Skills:       r.cfg.Skills,
		Services:     names,
	}
}

// plan runs the agent read-only and takes the plan from its final text.
func (r *run) plan() error {
	data := r.promptData()
	spec := agentSpec{Stage: "agent", ReadOnly: true}
	if r.order.Feedback != "" {
		if s := r.loadSession(); s != "" {
			spec.SessionID = s
			data.Continuing = true
		}
	}
	prompt, err := render(r.opts.Templates, PromptPlan, data)
	if err != nil {
		return err
	}
	spec.Prompt = prompt
	// What setup left in the tree (installs, generated files) is not the
	// agent's doing: a local commit, never pushed, sets it aside.
	if _, err := r.git.CommitAll(r.work, "sandbox: state after setup (plan mode, not pushed)"); err != nil {
		return err
	}
	out, err := r.agent(spec)
	if err != nil {
		return err
	}
	dirty, derr := r.git.Dirty(r.work)
	if derr != nil {
		return derr
	}
	if len(dirty) > 0 {
		return failed("plan mode must not change the repository, but the agent changed %d file(s): %s", len(dirty), strings.Join(clipList(dirty, 10), ", "))
	}
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	if out.FinalText == "" {
		return failed("the agent ended without writing a plan")
	}
	r.res.Plan = out.FinalText
	return nil
}

// implement is execute, continue and revise: one agent pass with the mode's
// prompt, then validation and repairs, pushing at each milestone.
func (r *run) implement() error {
	data := r.promptData()
	name := PromptExecute
	switch r.order.Mode {
	case dispatch.ModeContinue:
		name = PromptContinue
	case dispatch.ModeRevise:
		name = PromptRevise
	}
	if r.order.Mode != dispatch.ModeExecute && r.startSHA != r.baseSHA {
		h, err := r.git.History(r.work, "origin/"+r.baseBranch, 30)
		if err != nil {
			return err
		}
		data.History = h
	}
	prompt, err := render(r.opts.Templates, name, data)
	if err != nil {
		return err
	}
	stopPush := r.periodicPush()
	defer stopPush()

	out, aerr := r.agent(agentSpec{Stage: "agent", Prompt: prompt})
	r.res.PRSummary = out.FinalText
	if aerr != nil {
		return aerr
	}
	if err := r.milestone(r.commitMessage()); err != nil {
		return err
	}
	if err := r.validateAndRepair(out.OK()); err != nil {
		return err
	}
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	r.captureMedia()
	head, err := r.git.RevParse(r.work, "HEAD")
	if err != nil {
		return err
	}
	if head == r.startSHA {
		if r.order.Mode == dispatch.ModeExecute || r.order.Mode == dispatch.ModeRevise {
			return failed("the agent made no changes")
		}
		if head == r.baseSHA {
			return failed("the agent made no changes and the branch has none")
		}
	}
	return nil
}

func (r *run) commitMessage() string {
	title := strings.TrimSpace(r.order.Task.Title)
	if title == "" {
		title = "Agent task"
	}
	if len(title) > 68 {
		title = strings.TrimSpace(title[:68]) + "…"
	}
	var subject string
	switch r.order.Mode {
	case dispatch.ModeRevise:
		subject = "Address review feedback: " + title
	case dispatch.ModeContinue:
		subject = "Continue: " + title
	default:
		subject = title
	}
	trailer := "Task: " + r.order.TaskID
	if r.order.Repo != "" && r.order.Number != 0 {
		trailer += fmt.Sprintf("\nIssue: %s#%d", r.order.Repo, r.order.Number)
	}
	return r.red.String(subject + "\n\nWritten by the sandbox-bot agent (" + string(r.order.Mode) + " mode).\n\n" + trailer)
}

// mediaDir is where screenshots and recordings are committed, per task, so
// the PR body can link them at the media commit.
func mediaDir(taskID string) string { return ".sandbox/media/" + taskID }

// captureMedia screenshots dev.routes of the dev server and records a visit
// of them, commits the images in a media commit and pushes it. Media is a
// nicety: a failure is logged and reported, never fails the run.
func (r *run) captureMedia() {
	dev := r.cfg.Dev
	if dev.Command == "" || dev.Port == 0 || len(dev.Routes) == 0 {
		return
	}
	chromium, ffmpeg := r.opts.Chromium, r.opts.FFmpeg
	if chromium == "" || ffmpeg == "" {
		c, f := media.Lookup()
		chromium, ffmpeg = firstNonEmpty(chromium, c), firstNonEmpty(ffmpeg, f)
	}
	if chromium == "" {
		r.log.Warn().Msg("dev.routes are set but no Chromium is installed: no screenshots")
		r.prog.emit(dispatch.Progress{Stage: "media", Message: "skipped: no Chromium"})
		return
	}
	r.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("capturing %d route(s)", len(dev.Routes))})
	out := filepath.Join(r.order.OutputDir, "media")
	res, err := media.Capture(r.work, media.Options{
		Chromium: chromium, FFmpeg: ffmpeg, Dir: r.dir, Env: r.env,
		Command: dev.Command, Port: dev.Port, Routes: dev.Routes, OutDir: out,
		Log: r.log.With().Str("stage", "media").Logger(),
	})
	if err != nil {
		r.log.Warn().Err(err).Msg("media capture failed")
		r.prog.emit(dispatch.Progress{Stage: "media", Message: "failed: " + clipString(err.Error(), 200)})
		if res == nil || len(res.Screenshots) == 0 {
			return
		}
	}
	rel := mediaDir(r.order.TaskID)
	dst := filepath.Join(r.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		r.log.Warn().Err(err).Msg("media: create the media directory")
		return
	}
	copyIn := func(src string) (string, error) {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		name := filepath.Base(src)
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return "", err
		}
		return rel + "/" + name, nil
	}
	var shots, recs []string
	for _, s := range res.Screenshots {
		p, err := copyIn(s)
		if err != nil {
			r.log.Warn().Err(err).Msg("media: copy a screenshot")
			return
		}
		shots = append(shots, p)
	}
	for _, s := range res.Recordings {
		// The animated WebP is what a PR body shows; the WebM stays in
		// the output directory.
		if strings.HasSuffix(s, ".webp") {
			p, err := copyIn(s)
			if err != nil {
				r.log.Warn().Err(err).Msg("media: copy the recording")
				return
			}
			recs = append(recs, p)
		}
	}
	r.gitMu.Lock()
	sha, err := r.git.CommitPaths(r.work, fmt.Sprintf("Add screenshots of %s\n\nCaptured by sandbox-bot from the dev server.\n\nTask: %s", strings.Join(dev.Routes, ", "), r.order.TaskID), rel)
	r.gitMu.Unlock()
	if err != nil || sha == "" {
		r.log.Warn().Err(err).Msg("media: commit")
		return
	}
	r.res.MediaCommit, r.res.ScreenshotPaths, r.res.RecordingPaths = sha, shots, recs
	if err := r.push(r.work); err != nil {
		r.log.Warn().Err(err).Msg("media: push")
	}
}

// rebase brings the branch onto the latest base, giving conflicts to the
// agent, then validates and force-pushes with a lease.
func (r *run) rebase() error {
	up, err := r.git.IsAncestor(r.work, "origin/"+r.baseBranch, "HEAD")
	if err != nil {
		return err
	}
	if up {
		r.prog.emit(dispatch.Progress{Stage: "rebase", Message: "already up to date with " + r.baseBranch})
		return nil
	}
	r.prog.emit(dispatch.Progress{Stage: "rebase", Message: "rebasing onto " + r.baseBranch})
	_, rerr := r.git.run(r.work, "", "rebase", "origin/"+r.baseBranch)
	const maxRounds = 20
	for round := 1; rerr != nil; round++ {
		conflicts, err := r.git.Conflicts(r.work)
		if err != nil {
			return err
		}
		if len(conflicts) == 0 {
			return fmt.Errorf("rebase onto %s: %w", r.baseBranch, rerr)
		}
		if round > maxRounds {
			return failed("rebase still conflicts after %d rounds of resolution", maxRounds)
		}
		r.prog.emit(dispatch.Progress{Stage: "rebase", Message: fmt.Sprintf("conflicts in %s", strings.Join(clipList(conflicts, 5), ", "))})
		data := r.promptData()
		data.Conflicts = conflicts
		data.Continuing = r.session != ""
		prompt, err := render(r.opts.Templates, PromptRebase, data)
		if err != nil {
			return err
		}
		out, aerr := r.agent(agentSpec{Stage: "rebase", Prompt: prompt, SessionID: r.session})
		if aerr != nil {
			return aerr
		}
		if !out.OK() {
			return failed("resolving rebase conflicts: %s", out.Problem())
		}
		if left := filesWithMarkers(r.dir, conflicts); len(left) > 0 {
			return failed("the agent left conflict markers in %s", strings.Join(left, ", "))
		}
		if _, err := r.git.run(r.work, "", "add", "--all"); err != nil {
			return err
		}
		_, rerr = r.git.run(r.work, "", "-c", "core.editor=true", "rebase", "--continue")
	}
	r.log.Info().Msg("rebase done")
	if err := r.validateAndRepair(true); err != nil {
		return err
	}
	return r.push(r.work)
}

// task runs the agent in the artifacts directory; there is no repository.
func (r *run) task() error {
	prompt, err := render(r.opts.Templates, PromptTask, r.promptData())
	if err != nil {
		return err
	}
	out, aerr := r.agent(agentSpec{Stage: "agent", Prompt: prompt})
	r.res.PRSummary = out.FinalText
	r.collectArtifacts()
	if aerr != nil {
		return aerr
	}
	if err := r.validateAndRepair(out.OK()); err != nil {
		return err
	}
	r.collectArtifacts()
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	return nil
}

func (r *run) collectArtifacts() {
	var arts []string
	filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(r.order.OutputDir, p); err == nil {
			arts = append(arts, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(arts)
	r.res.Artifacts = arts
}

// agent runs one agent pass and, if the agent CLI rejected an operation
// nobody could approve, one more pass in the same session that tells the
// agent what was rejected and why.
func (r *run) agent(spec agentSpec) (*agentOutcome, error) {
	out := r.invoke(spec)
	if len(out.Stalls) > 0 && out.Stop == StopNone && r.work.Err() == nil {
		r.log.Warn().Strs("rejected", out.Stalls).Msg("the agent CLI rejected operations; giving the agent one more pass")
		r.prog.emit(dispatch.Progress{Stage: spec.Stage, Message: "rejected: " + strings.Join(out.Stalls, "; ")})
		data := r.promptData()
		data.Rejected = out.Stalls
		prompt, err := render(r.opts.Templates, PromptStall, data)
		if err != nil {
			return out, err
		}
		retry := spec
		retry.Prompt, retry.SessionID = prompt, out.SessionID
		again := r.invoke(retry)
		again.Stalls = append(out.Stalls, again.Stalls...)
		again.Usage.Add(out.Usage)
		if again.FinalText == "" {
			again.FinalText = out.FinalText
		}
		out = again
	}
	return out, r.stopError(out, spec.Stage == "repair")
}

// invoke runs the agent once and accounts for it.
func (r *run) invoke(spec agentSpec) *agentOutcome {
	repair := spec.Stage == "repair"
	costCap := r.budget - r.mainCost
	if repair {
		costCap = r.repairBudget - r.repairCost
	}
	inactivity := time.Duration(r.cfg.InactivitySeconds) * time.Second
	p := &agentProc{
		h: r.h,
		req: harness.Request{
			Dir:       r.dir,
			Prompt:    spec.Prompt,
			Model:     r.cfg.Model,
			Env:       r.env,
			SessionID: spec.SessionID,
			ReadOnly:  spec.ReadOnly,
		},
		inactivity:   inactivity,
		startupGrace: r.opts.StartupGrace,
		killGrace:    r.opts.KillGrace,
		log:          r.log.With().Str("stage", spec.Stage).Logger(),
		red:          r.red,
		costSoFar:    r.res.TokenUsage.TotalCostUSD,
		costCap:      max(costCap, 1e-9),
	}
	base := r.res.TokenUsage
	p.onEvent = func(ev harness.Event, st agentStats) {
		pr := dispatch.Progress{Stage: spec.Stage, Step: st.Steps, ToolCalls: base.Steps + st.ToolCalls, CostUSD: base.TotalCostUSD + st.CostUSD, Tokens: base.Input + base.Output + st.Tokens}
		switch ev.Type {
		case harness.EventToolUse:
			pr.Message, pr.Tool = "tool "+ev.Tool, ev.Tool
		case harness.EventStepFinish:
			pr.Message = fmt.Sprintf("step %d done", st.Completed)
		case harness.EventError:
			pr.Message = "agent error: " + clipString(ev.Text, 200)
		case harness.EventSession:
			pr.Message = "agent session " + ev.SessionID
		default:
			return
		}
		r.prog.emit(pr)
	}
	r.prog.emit(dispatch.Progress{Stage: spec.Stage, Message: "agent " + r.h.Name() + " started"})
	out := p.run(r.work)
	r.res.TokenUsage.Add(out.Usage)
	if repair {
		r.repairCost += out.Usage.TotalCostUSD
	} else {
		r.mainCost += out.Usage.TotalCostUSD
	}
	if out.SessionID != "" {
		r.session = out.SessionID
		r.saveSession()
	}
	if out.ParseErrors > 0 {
		r.log.Warn().Int("lines", out.ParseErrors).Msg("skipped agent output lines that did not parse")
	}
	return out
}

// stopError maps a stopped agent to the run's status.
func (r *run) stopError(out *agentOutcome, repair bool) error {
	switch out.Stop {
	case StopHung:
		return &statusError{status: dispatch.StatusHung, diag: out.Diagnostic,
			msg: fmt.Sprintf("the agent printed no event for %ds (inactivity_timeout); it was stopped", r.cfg.InactivitySeconds)}
	case StopBudget:
		limit, what := r.budget, "max_budget_usd"
		if repair {
			limit, what = r.repairBudget, "the repair budget"
		}
		return &statusError{status: dispatch.StatusBudgetExceeded, diag: out.Diagnostic,
			msg: fmt.Sprintf("the agent's cost passed %s ($%.2f); it was stopped", what, limit)}
	case StopInterrupted:
		return r.interruption(out.Diagnostic)
	}
	return nil
}

func (r *run) interruption(diag *dispatch.Diagnostic) error {
	if r.parent.Err() != nil {
		return &statusError{status: dispatch.StatusInterrupted, diag: diag, msg: "the run was stopped (SIGTERM) before it finished; the work so far is pushed"}
	}
	return &statusError{status: dispatch.StatusTimeout, diag: diag, msg: "timeout_minutes passed before the run finished; the work so far is pushed"}
}

// validateAndRepair runs the checks and, when the main task succeeded,
// gives the agent the failing checks' output up to repair.attempts times
// within the repair budget.
func (r *run) validateAndRepair(mainOK bool) error {
	if len(r.cfg.Validate) == 0 {
		return nil
	}
	runs := r.validate()
	if r.work.Err() != nil {
		return r.interruption(nil)
	}
	attempts := r.cfg.RepairAttempts()
	for i := 1; i <= attempts && mainOK && len(failing(runs)) > 0; i++ {
		bad := failing(runs)
		rep := dispatch.Repair{Attempt: i}
		data := r.promptData()
		data.Continuing = r.session != ""
		data.Attempt, data.MaxAttempts = i, attempts
		for _, f := range bad {
			rep.FailedChecks = append(rep.FailedChecks, f.Check.Name)
			data.Failed = append(data.Failed, FailedCheck{Name: f.Check.Name, Command: f.Check.Command, Tail: f.Tail, TimedOut: f.TimedOut})
		}
		if r.repairBudget-r.repairCost <= 0 {
			return &statusError{status: dispatch.StatusBudgetExceeded, msg: fmt.Sprintf("the repair budget ($%.2f) is used up with checks still failing: %s", r.repairBudget, strings.Join(rep.FailedChecks, ", "))}
		}
		prompt, err := render(r.opts.Templates, PromptRepair, data)
		if err != nil {
			return err
		}
		r.prog.emit(dispatch.Progress{Stage: "repair", Message: fmt.Sprintf("repair %d/%d: %s", i, attempts, strings.Join(rep.FailedChecks, ", "))})
		before := r.repairCost
		out, aerr := r.agent(agentSpec{Stage: "repair", Prompt: prompt, SessionID: r.session})
		rep.CostUSD = r.repairCost - before
		if r.git != nil {
			if err := r.milestone(fmt.Sprintf("Fix failing checks: %s (repair %d)\n\nTask: %s", strings.Join(rep.FailedChecks, ", "), i, r.order.TaskID)); err != nil {
				r.res.Repairs = append(r.res.Repairs, rep)
				return err
			}
		}
		if aerr != nil {
			r.res.Repairs = append(r.res.Repairs, rep)
			return aerr
		}
		runs = r.validate()
		if r.work.Err() != nil {
			r.res.Repairs = append(r.res.Repairs, rep)
			return r.interruption(nil)
		}
		rep.Fixed = len(failing(runs)) == 0
		r.res.Repairs = append(r.res.Repairs, rep)
		if !out.OK() {
			break
		}
	}
	if bad := failing(runs); len(bad) > 0 {
		var names []string
		for _, b := range bad {
			names = append(names, b.Check.Name)
		}
		return failed("checks still failing after %d repair attempt(s): %s", len(r.res.Repairs), strings.Join(names, ", "))
	}
	return nil
}

// validate runs all checks once and records them in the receipt. Files the
// checks leave behind (coverage reports, caches a .gitignore misses) are
// excluded from commits: they are not the agent's work.
func (r *run) validate() []checkRun {
	r.prog.emit(dispatch.Progress{Stage: "validate", Message: fmt.Sprintf("running %d check(s)", len(r.cfg.Validate))})
	if r.git != nil {
		defer func() {
			r.gitMu.Lock()
			defer r.gitMu.Unlock()
			left, err := r.git.Untracked(r.work)
			if err == nil && len(left) > 0 {
				r.log.Info().Strs("files", clipList(left, 20)).Msg("excluding files the checks left from commits")
				pats := make([]string, len(left))
				for i, l := range left {
					pats[i] = literalPattern(l)
				}
				if err := r.git.Exclude(pats...); err != nil {
					r.log.Warn().Err(err).Msg("could not exclude the checks' byproducts")
				}
			}
		}()
	}
	return runChecks(r.work, r.dir, r.env, r.cfg.Validate, r.red, func(c checkRun) {
		cr, ok := r.checks[c.Check.Name]
		if !ok {
			cr = &dispatch.CheckResult{Name: c.Check.Name, Command: c.Check.Command}
			r.checks[c.Check.Name] = cr
			r.checkOrder = append(r.checkOrder, c.Check.Name)
		}
		cr.Attempts++
		cr.Passed = c.Passed
		cr.DurationSeconds = c.Duration.Seconds()
		cr.OutputTail = c.Tail
		verdict := "passed"
		if !c.Passed {
			verdict = "failed"
		}
		r.log.Info().Str("check", c.Check.Name).Bool("passed", c.Passed).Dur("took", c.Duration).Msg("check " + verdict)
		r.prog.emit(dispatch.Progress{Stage: "validate", Message: fmt.Sprintf("%s %s", c.Check.Name, verdict)})
	})
}

// milestone commits the agent's work and pushes it.
func (r *run) milestone(msg string) error {
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	sha, err := r.git.CommitAll(r.work, msg)
	if err != nil {
		return err
	}
	if sha != "" {
		r.log.Info().Str("sha", sha).Msg("committed")
	}
	if !r.pushes || r.order.Mode == dispatch.ModeRebase {
		return nil
	}
	return r.pushLocked(r.work)
}

func (r *run) push(ctx context.Context) error {
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	return r.pushLocked(ctx)
}

// pushLocked pushes HEAD if it moved since the last push and the branch
// has something beyond the base.
func (r *run) pushLocked(ctx context.Context) error {
	head, err := r.git.RevParse(ctx, "HEAD")
	if err != nil {
		return err
	}
	if head == r.pushedSHA || head == r.baseSHA {
		return nil
	}
	lease := ""
	if r.order.Mode == dispatch.ModeRebase {
		lease = r.lease
	}
	if err := r.git.Push(ctx, r.order.TargetBranch, lease); err != nil {
		return fmt.Errorf("push %s: %w", r.order.TargetBranch, err)
	}
	r.pushedSHA = head
	if r.order.Mode == dispatch.ModeRebase {
		r.lease = head
	}
	r.log.Info().Str("branch", r.order.TargetBranch).Str("sha", head).Msg("pushed")
	r.prog.emit(dispatch.Progress{Stage: "push", Message: "pushed " + r.order.TargetBranch, Branch: r.order.TargetBranch, HeadSHA: head})
	return nil
}

// periodicPush saves work in progress every PushInterval while the agent
// works, so a sandbox that dies without a SIGTERM loses minutes, not hours.
func (r *run) periodicPush() func() {
	if !r.pushes {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.opts.PushInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-r.work.Done():
				return
			case <-t.C:
				if err := r.milestone("WIP: checkpoint of " + r.order.TaskID); err != nil {
					r.log.Warn().Err(err).Msg("periodic push failed; retrying at the next one")
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// finish makes the run durable and writes the receipt: whatever happened,
// committed work is pushed (with a fresh deadline when the run's context
// is gone) and result.json is written.
func (r *run) finish(err error) {
	res := r.res
	res.Status = dispatch.StatusCompleted
	var se *statusError
	switch {
	case r.parent.Err() != nil:
		res.Status = dispatch.StatusInterrupted
		if errors.As(err, &se) && se.status == dispatch.StatusInterrupted {
			res.Error = &dispatch.RunError{Message: se.msg, Diagnostic: se.diag}
		} else {
			res.Error = &dispatch.RunError{Message: "the run was stopped (SIGTERM) before it finished"}
		}
	case r.work != nil && errors.Is(r.work.Err(), context.DeadlineExceeded):
		res.Status = dispatch.StatusTimeout
		msg := "timeout_minutes passed before the run finished"
		var diag *dispatch.Diagnostic
		if errors.As(err, &se) {
			diag = se.diag
		}
		res.Error = &dispatch.RunError{Message: msg, Diagnostic: diag}
	case errors.As(err, &se):
		res.Status = se.status
		res.Error = &dispatch.RunError{Message: se.msg, Diagnostic: se.diag}
	case err != nil:
		res.Status = dispatch.StatusFailed
		res.Error = &dispatch.RunError{Message: err.Error()}
	}

	if r.git != nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.FinalPushTimeout)
		if perr := r.saveWork(ctx, res.Status); perr != nil {
			r.log.Error().Err(perr).Msg("could not push the work")
			if res.Status == dispatch.StatusCompleted {
				res.Status = dispatch.StatusFailed
				res.Error = &dispatch.RunError{Message: perr.Error()}
			} else if res.Error != nil {
				res.Error.Message += "; and the final push failed: " + perr.Error()
			}
		}
		r.describe(ctx)
		cancel()
	}
	if r.order.Mode == dispatch.ModeExecute && res.Plan == "" {
		res.Plan = r.order.Plan
	}
	res.DurationSeconds = time.Since(r.start).Seconds()
	if res.Error != nil {
		res.Error.Message = r.red.String(res.Error.Message)
	}
	res.PRSummary = r.red.String(res.PRSummary)
	res.Plan = r.red.String(res.Plan)
	for _, name := range r.checkOrder {
		res.Validation = append(res.Validation, *r.checks[name])
	}
	r.red.Refresh()
	if r.order.OutputDir != "" {
		if werr := dispatch.WriteResult(r.order.OutputDir, res); werr != nil {
			r.log.Error().Err(werr).Msg("could not write result.json")
		}
	}
	msg := "done: " + string(res.Status)
	if res.Error != nil {
		msg += ": " + clipString(res.Error.Message, 300)
	}
	r.prog.emit(dispatch.Progress{Stage: "done", Message: msg, Status: res.Status, CostUSD: res.TokenUsage.TotalCostUSD,
		Tokens: res.TokenUsage.Input + res.TokenUsage.Output, Branch: res.Branch, HeadSHA: res.HeadSHA})
	ev := r.log.Info()
	if res.Status != dispatch.StatusCompleted {
		ev = r.log.Warn()
	}
	ev.Str("status", string(res.Status)).Float64("cost_usd", res.TokenUsage.TotalCostUSD).Int("steps", res.TokenUsage.Steps).
		Float64("duration_s", res.DurationSeconds).Msg("run ended")
	if r.tempWork {
		os.RemoveAll(r.workDir)
	}
}

// saveWork commits what the agent left and pushes, in the modes that push.
func (r *run) saveWork(ctx context.Context, status dispatch.Status) error {
	if !r.pushes {
		return nil
	}
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	if r.git.RebaseInProgress() {
		// A half-done rebase is no state to push; the remote branch stays
		// as it was.
		_, err := r.git.run(ctx, "", "rebase", "--abort")
		return err
	}
	if status != dispatch.StatusCompleted {
		msg := fmt.Sprintf("WIP: %s (%s)\n\nThe sandbox saved the agent's work in progress.\n\nTask: %s", r.order.Task.Title, status, r.order.TaskID)
		if _, err := r.git.CommitAll(ctx, r.red.String(msg)); err != nil {
			return err
		}
	}
	return r.pushLocked(ctx)
}

// describe fills the receipt's git facts.
func (r *run) describe(ctx context.Context) {
	if r.baseSHA == "" {
		return
	}
	head, err := r.git.RevParse(ctx, "HEAD")
	if err != nil {
		return
	}
	if r.pushes {
		r.res.HeadSHA = head
		from := r.startSHA
		if r.order.Mode == dispatch.ModeExecute || r.order.Mode == dispatch.ModeRebase {
			from = "origin/" + r.baseBranch
		}
		if commits, err := r.git.Log(ctx, from); err == nil {
			r.res.Commits = commits
		}
		if ds, err := r.git.DiffStats(ctx, "origin/"+r.baseBranch); err == nil {
			r.res.DiffStats = ds
		}
	}
}

// sessionFile remembers the agent session across runner processes: the
// CLI's plan revisions run as separate tasks that share one state
// directory. A state directory is per task unless a caller shares it on
// purpose, so the file is trusted for any task of the same harness.
type sessionFile struct {
	TaskID    string `json:"task_id"`
	Harness   string `json:"harness"`
	SessionID string `json:"session_id"`
	// Dir is the checkout the session worked in: OpenCode cannot continue
	// a session from another directory (it waits forever), so a session is
	// only reused where it was made.
	Dir string `json:"dir"`
}

const sessionFileName = "agent-session.json"

func (r *run) saveSession() {
	b, _ := json.Marshal(sessionFile{TaskID: r.order.TaskID, Harness: r.h.Name(), SessionID: r.session, Dir: r.dir})
	if err := os.WriteFile(filepath.Join(r.stateDir, sessionFileName), b, 0o600); err != nil {
		r.log.Warn().Err(err).Msg("could not save the agent session id")
	}
}

func (r *run) loadSession() string {
	b, err := os.ReadFile(filepath.Join(r.stateDir, sessionFileName))
	if err != nil {
		return ""
	}
	var s sessionFile
	if json.Unmarshal(b, &s) != nil || s.Harness != r.h.Name() {
		return ""
	}
	if s.Dir != r.dir {
		r.log.Info().Str("session", s.SessionID).Str("made_in", s.Dir).Msg("the saved agent session was made in another checkout; starting a new one")
		return ""
	}
	return s.SessionID
}

// filesWithMarkers returns the files that still hold conflict markers.
func filesWithMarkers(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") || l == "=======" {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(append([]string(nil), l[:n]...), fmt.Sprintf("and %d more", len(l)-n))
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
