package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

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
	if r.opts.Agent != nil {
		// The agent reaches its checkout through the work dir and reads
		// the git identity and the mirror in the state dir; MkdirTemp
		// made the first 0700.
		for _, d := range []string{r.workDir, r.stateDir} {
			if err := os.Chmod(d, 0o755); err != nil {
				return fmt.Errorf("open %s to the agent: %w", d, err)
			}
		}
	}
	// What is the runner's alone: the credential helper.
	r.privDir = filepath.Join(r.stateDir, "private")
	if err := os.MkdirAll(r.privDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", r.privDir, err)
	}
	return os.Chmod(r.privDir, 0o700)
}

// prepare clones and checks out the branch the mode works on, or makes the
// artifacts directory in task mode.
func (r *run) prepare() error {
	if r.spec.start == startSource {
		return r.unpackSource()
	}
	if r.spec.start == startNone {
		r.dir = filepath.Join(r.order.OutputDir, dispatch.ArtifactsDir)
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return err
		}
		return r.opts.Agent.give(r.dir)
	}
	r.dir = filepath.Join(r.workDir, "repo")
	if err := os.RemoveAll(r.dir); err != nil {
		return err
	}
	// The checkout is the agent's: it edits it, and the git commands that
	// touch it run as the agent (see Git).
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return fmt.Errorf("create the checkout directory: %w", err)
	}
	if err := r.opts.Agent.give(r.dir); err != nil {
		return err
	}
	g, err := gitSetup(gitPaths{State: r.stateDir, Private: r.privDir, Dir: r.dir}, r.opts.Environ, r.agentBase(), r.order.TokenFile, r.opts.GitName, r.opts.GitEmail, r.opts.Agent, r.red)
	if err != nil {
		return err
	}
	r.git = g
	r.prog.emit(dispatch.Progress{Stage: "clone", Message: "cloning " + redactURL(r.order.CloneURL)})
	if err := g.Clone(r.work, r.order.CloneURL); err != nil {
		return err
	}
	r.baseBranch = firstNonEmpty(r.order.BaseBranch, r.cfg.Branch)
	if r.baseBranch == "" {
		if r.baseBranch, err = g.RemoteDefault(r.work); err != nil {
			return err
		}
	}
	r.baseSHA, err = g.RemoteBranch(r.work, r.baseBranch)
	if err != nil {
		return failed("base branch %q does not exist on the remote", r.baseBranch)
	}
	target := r.order.TargetBranch
	targetSHA := ""
	if target != "" {
		targetSHA, _ = g.RemoteBranch(r.work, target)
	}
	targetExists := targetSHA != ""
	if err := r.checkoutStart(g, target, targetSHA); err != nil {
		return err
	}
	if r.startSHA, err = g.Head(r.work); err != nil {
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

// checkoutStart checks out what the mode starts from: the base branch, the
// target branch (made from the base when it does not exist yet), or a
// target branch that must exist. targetSHA is where the remote's target
// branch is ("" when it has none).
func (r *run) checkoutStart(g *Git, target, targetSHA string) error {
	branch, from, at := r.baseBranch, r.baseBranch, r.baseSHA
	switch r.spec.start {
	case startTarget:
		branch = target
		note := r.spec.onMissing
		if targetSHA != "" {
			from, at, note = target, targetSHA, r.spec.onExisting
		}
		if note != "" {
			r.log.Warn().Str("branch", target).Msg(note)
		}
	case startPRHead:
		return r.checkoutPRHead(g)
	case startMust:
		if targetSHA == "" {
			return failed("branch %q does not exist on the remote; there is nothing to %s", target, r.order.Mode)
		}
		if pr := r.order.PR; r.spec.personsBranch && pr != nil && pr.HeadSHA != "" && targetSHA != pr.HeadSHA {
			return failed("branch %q moved since the fix was asked for (it was at %s, it is at %s): nothing was changed", target, shortRev(pr.HeadSHA), shortRev(targetSHA))
		}
		branch, from, at = target, target, targetSHA
	}
	r.pushes = r.spec.pushes
	if err := g.Checkout(r.work, branch, "origin/"+from); err != nil {
		return err
	}
	// checkout -B left HEAD at the commit it started from: the runner
	// knows it without asking git again.
	g.knowHead(at)
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
	r.env, err = r.agentEnv(res.Vars)
	return err
}

// setup runs lifecycle.setup, or restores what it produced from the setup
// cache (setupcache.go), and records which in the receipt.
func (r *run) setup() error {
	if len(r.cfg.Lifecycle.Setup) == 0 {
		return nil
	}
	start := time.Now()
	rep := &dispatch.SetupReport{Status: dispatch.SetupRan}
	r.res.Setup = rep
	defer func() {
		rep.Seconds = time.Since(start).Seconds()
		note := rep.Status
		if rep.Status == dispatch.SetupRan && rep.Key != "" {
			note = "ran, cache missed"
		}
		r.tl.add("setup", start, note)
	}()
	cache, err := r.newSetupCache(rep)
	if err != nil {
		return err
	}
	if cache != nil && cache.restore(rep) {
		rep.Status = dispatch.SetupCached
		r.prog.emit(dispatch.Progress{Stage: "setup", Message: rep.String()})
		return nil
	}
	if err := r.runSetup(); err != nil {
		rep.Status = dispatch.SetupFailed
		return err
	}
	if cache != nil {
		saved := time.Now()
		cache.save(rep)
		r.tl.add("setup-cache-save", saved, "")
	}
	r.prog.emit(dispatch.Progress{Stage: "setup", Message: rep.String()})
	return nil
}

func (r *run) runSetup() error {
	for i, c := range r.cfg.Lifecycle.Setup {
		r.prog.emit(dispatch.Progress{Stage: "setup", Message: fmt.Sprintf("setup %d/%d: %s", i+1, len(r.cfg.Lifecycle.Setup), c)})
		out, _, err := shellRun(r.work, r.dir, r.env, r.opts.Agent, c, 0, r.red)
		if r.work.Err() != nil {
			return r.work.Err()
		}
		if err != nil {
			return failed("lifecycle.setup[%d] `%s` failed: %v\n%s", i, c, err, out)
		}
	}
	return nil
}
