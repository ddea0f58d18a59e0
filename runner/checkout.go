package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// checkout is the stage that makes the run's workspace, a value of its own
// built from the work order and what the run was given: the directories,
// the browser, the clone and the branch the mode starts from, the agent's
// environment, and setup (or its cache). It writes the workspace and the
// receipt's parts of it (the branch, the setup report), nothing else.
type checkout struct {
	ws    *workspace
	order dispatch.WorkOrder
	spec  modeSpec
	// cfg is the run's; the browser adds its MCP server to it before the
	// harness is made.
	cfg          *sandboxcfg.Resolved
	opts         Options
	work, parent context.Context
	res          *dispatch.Result
	tl           *timeline
	red          *Redactor
	log          zerolog.Logger
	prog         *reporter
}

func (c *checkout) dirs() error {
	c.ws.workDir = c.opts.WorkDir
	if c.ws.workDir == "" {
		d, err := os.MkdirTemp("", "sandbox-run-"+c.order.TaskID+"-")
		if err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
		c.ws.workDir, c.ws.tempWork = d, true
	}
	c.ws.stateDir = c.opts.StateDir
	if c.ws.stateDir == "" {
		c.ws.stateDir = filepath.Join(c.ws.workDir, "state")
	}
	for _, d := range []string{c.ws.workDir, c.ws.stateDir, c.order.OutputDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if c.opts.Agent != nil {
		// The agent reaches its checkout through the work dir and reads
		// the git identity and the mirror in the state dir; MkdirTemp
		// made the first 0700.
		for _, d := range []string{c.ws.workDir, c.ws.stateDir} {
			if err := os.Chmod(d, 0o755); err != nil {
				return fmt.Errorf("open %s to the agent: %w", d, err)
			}
		}
	}
	// What is the runner's alone: the credential helper.
	c.ws.privDir = filepath.Join(c.ws.stateDir, "private")
	if err := os.MkdirAll(c.ws.privDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", c.ws.privDir, err)
	}
	return os.Chmod(c.ws.privDir, 0o700)
}

// prepare clones and checks out the branch the mode works on, or makes the
// artifacts directory in task mode.
func (c *checkout) prepare() error {
	if c.spec.start == startSource {
		return c.unpackSource()
	}
	if c.spec.start == startNone {
		c.ws.dir = filepath.Join(c.order.OutputDir, dispatch.ArtifactsDir)
		if err := os.MkdirAll(c.ws.dir, 0o755); err != nil {
			return err
		}
		return c.opts.Agent.give(c.ws.dir)
	}
	c.ws.dir = filepath.Join(c.ws.workDir, "repo")
	if err := os.RemoveAll(c.ws.dir); err != nil {
		return err
	}
	// The checkout is the agent's: it edits it, and the git commands that
	// touch it run as the agent (see Git).
	if err := os.Mkdir(c.ws.dir, 0o755); err != nil {
		return fmt.Errorf("create the checkout directory: %w", err)
	}
	if err := c.opts.Agent.give(c.ws.dir); err != nil {
		return err
	}
	g, err := gitSetup(gitPaths{State: c.ws.stateDir, Private: c.ws.privDir, Dir: c.ws.dir}, c.opts.Environ, agentBase(c.opts.Environ, c.order.TokenFile, c.opts.Agent), c.order.TokenFile, c.opts.GitName, c.opts.GitEmail, c.opts.Agent, c.red)
	if err != nil {
		return err
	}
	c.ws.git = g
	c.prog.emit(dispatch.Progress{Stage: "clone", Message: "cloning " + redactURL(c.order.CloneURL)})
	if err := g.Clone(c.work, c.order.CloneURL); err != nil {
		return err
	}
	c.ws.baseBranch = firstNonEmpty(c.order.BaseBranch, c.cfg.Branch)
	if c.ws.baseBranch == "" {
		if c.ws.baseBranch, err = g.RemoteDefault(c.work); err != nil {
			return err
		}
	}
	c.ws.baseSHA, err = g.RemoteBranch(c.work, c.ws.baseBranch)
	if err != nil {
		return failed("base branch %q does not exist on the remote", c.ws.baseBranch)
	}
	target := c.order.TargetBranch
	targetSHA := ""
	if target != "" {
		targetSHA, _ = g.RemoteBranch(c.work, target)
	}
	targetExists := targetSHA != ""
	if err := c.checkoutStart(g, target, targetSHA); err != nil {
		return err
	}
	if c.ws.startSHA, err = g.Head(c.work); err != nil {
		return err
	}
	if targetExists {
		c.ws.pushedAtStart = c.ws.startSHA
	}
	// The sandbox writes resolved .env files into the checkout; they hold
	// secrets and must never be committed.
	if err := g.Exclude(".env", ".env.local"); err != nil {
		return err
	}
	c.res.Branch = target
	c.log.Info().Str("base", c.ws.baseBranch).Str("branch", target).Str("head", c.ws.startSHA).Msg("checked out")
	return nil
}

// checkoutStart checks out what the mode starts from: the base branch, the
// target branch (made from the base when it does not exist yet), or a
// target branch that must exist. targetSHA is where the remote's target
// branch is ("" when it has none).
func (c *checkout) checkoutStart(g *Git, target, targetSHA string) error {
	branch, from, at := c.ws.baseBranch, c.ws.baseBranch, c.ws.baseSHA
	switch c.spec.start {
	case startTarget:
		branch = target
		note := c.spec.onMissing
		if targetSHA != "" {
			from, at, note = target, targetSHA, c.spec.onExisting
		}
		if note != "" {
			c.log.Warn().Str("branch", target).Msg(note)
		}
	case startPRHead:
		return c.checkoutPRHead(g)
	case startMust:
		if targetSHA == "" {
			return failed("branch %q does not exist on the remote; there is nothing to %s", target, c.order.Mode)
		}
		if pr := c.order.PR; c.spec.personsBranch && pr != nil && pr.HeadSHA != "" && targetSHA != pr.HeadSHA {
			return failed("branch %q moved since the fix was asked for (it was at %s, it is at %s): nothing was changed", target, shortRev(pr.HeadSHA), shortRev(targetSHA))
		}
		branch, from, at = target, target, targetSHA
	}
	c.ws.pushes = c.spec.pushes
	if err := g.Checkout(c.work, branch, "origin/"+from); err != nil {
		return err
	}
	// checkout -B left HEAD at the commit it started from: the runner
	// knows it without asking git again.
	g.knowHead(at)
	return nil
}

func (c *checkout) resolveEnv() error {
	secrets := map[string]string{}
	for _, n := range c.order.SecretEnv {
		if v, ok := lookupEnv(c.opts.Environ, n); ok {
			secrets[n] = v
		}
	}
	repoDir := ""
	if c.ws.git != nil {
		repoDir = c.ws.dir
	}
	res, err := ResolveEnv(EnvSources{YAML: c.cfg.Env, RepoDir: repoDir, Secrets: secrets, EnvFile: c.opts.EnvFile, Services: c.ws.services})
	if err != nil {
		return err
	}
	for _, u := range res.Unresolved {
		c.log.Warn().Msg("env " + u)
	}
	c.ws.env, err = c.agentEnv(res.Vars)
	return err
}

// setup runs lifecycle.setup, or restores what it produced from the setup
// cache (setupcache.go), and records which in the receipt.
func (c *checkout) setup() error {
	if len(c.cfg.Lifecycle.Setup) == 0 {
		return nil
	}
	start := time.Now()
	rep := &dispatch.SetupReport{Status: dispatch.SetupRan}
	c.res.Setup = rep
	defer func() {
		rep.Seconds = time.Since(start).Seconds()
		note := rep.Status
		if rep.Status == dispatch.SetupRan && rep.Key != "" {
			note = "ran, cache missed"
		}
		c.tl.add("setup", start, note)
	}()
	cache, err := c.newSetupCache(rep)
	if err != nil {
		return err
	}
	if cache != nil && cache.restore(rep) {
		rep.Status = dispatch.SetupCached
		c.prog.emit(dispatch.Progress{Stage: "setup", Message: rep.String()})
		return nil
	}
	if err := c.runSetup(); err != nil {
		rep.Status = dispatch.SetupFailed
		return err
	}
	if cache != nil {
		saved := time.Now()
		cache.save(rep)
		c.tl.add("setup-cache-save", saved, "")
	}
	c.prog.emit(dispatch.Progress{Stage: "setup", Message: rep.String()})
	return nil
}

func (c *checkout) runSetup() error {
	for i, cmd := range c.cfg.Lifecycle.Setup {
		c.prog.emit(dispatch.Progress{Stage: "setup", Message: fmt.Sprintf("setup %d/%d: %s", i+1, len(c.cfg.Lifecycle.Setup), cmd)})
		out, _, err := shellRun(c.work, c.ws.dir, c.ws.env, c.opts.Agent, cmd, 0, c.red)
		if c.work.Err() != nil {
			return c.work.Err()
		}
		if err != nil {
			return failed("lifecycle.setup[%d] `%s` failed: %v\n%s", i, cmd, err, out)
		}
	}
	return nil
}
