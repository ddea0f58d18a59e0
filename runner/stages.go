package runner

// The stages of a run are values of their own, each built here from the
// explicit inputs it reads and writes, so that run keeps only the
// pipeline's order (pipelines.go) and the receipt (receipt.go):
//
//   - checkout (checkout.go) makes the workspace: directories, browser,
//     clone, environment, setup;
//   - branch (push.go) is the run's branch on the remote: commits, pushes,
//     the periodic push, the lease;
//   - agentDriver (invoke.go) runs the agent's passes within the budgets;
//   - sessions (session.go, sessioncarry.go) keep the agent's sessions;
//   - the checks before the PR: secretGate (prsecrets.go), depCheck
//     (prdeps.go), scopeCheck (planscope.go), reviewer (review.go);
//   - mediaCapture (mediacommit.go) takes the screenshots and commits them.

// buildChecks makes the run's branch and its checks before the PR once the
// checkout knows its base (pushed is the remote branch's commit when it
// existed, "" otherwise): the secret scan for every checkout (a rebase
// pushes too), the dependency report for runs that push, the plan's scope
// for a run that implements an approved plan with files.
func (r *run) buildChecks(g *Git, pushed string) {
	r.sec = newSecretGate(g, r.ws.baseSHA, r.cfg.Secrets.Allow, r.red, r.log, r.prog, commitSubject(r.spec.subject, r.order.Task.Title), r.order.TaskID)
	r.br = &branch{git: g, sec: r.sec, target: r.order.TargetBranch, base: r.ws.baseBranch, baseSHA: r.ws.baseSHA, pushed: pushed, lease: pushed,
		spec: r.spec, mode: r.order.Mode, taskID: r.order.TaskID, title: r.order.Task.Title, red: r.red, log: r.log, prog: r.prog}
	if !r.ws.pushes {
		return
	}
	ch := change{git: g, baseSHA: r.ws.baseSHA, media: mediaDir(r.order.TaskID)}
	r.deps = &depCheck{change: ch, osvDir: r.opts.OSVDir, log: r.log}
	if len(r.order.PlanFiles) > 0 && r.spec.pipeline == pipeImplement {
		r.scope = &scopeCheck{change: ch, files: r.order.PlanFiles, strict: r.cfg.Plan.Strict, reasons: r.reasons, masked: r.sec.masked, log: r.log}
	}
}

// reviewer is the run's reviewer's pass (review.enabled), in implementing
// runs that push.
func (r *run) reviewer() *reviewer {
	return &reviewer{cfg: r.cfg.Review, model: r.cfg.Model, harness: r.h.Name(), budget: r.ag.budget * r.cfg.Review.BudgetShare,
		git: r.ws.git, baseSHA: r.ws.baseSHA, gitMu: &r.br.mu, templates: r.opts.Templates, red: r.red, prog: r.prog, log: r.log, invoke: r.ag.invoke}
}

// agentDriver is what runs the agent's passes, once the checkout, its
// environment and the harness are there.
func (r *run) agentDriver(budget float64) *agentDriver {
	return &agentDriver{h: r.h, dir: r.ws.dir, env: r.ws.env, cfg: r.cfg, startupGrace: r.opts.StartupGrace, killGrace: r.opts.KillGrace,
		as: r.opts.Agent, templates: r.opts.Templates, budget: budget, repairBudget: r.cfg.RepairBudget(budget),
		work: r.work, parent: r.parent, browser: r.ws.browser, cast: r.ws.cast, promptData: r.promptData, reasons: r.reasons,
		sessions: r.sessions(), res: r.res, tl: &r.tl, prog: r.prog, red: r.red, log: r.log}
}

// sessions keep the agent's sessions of this run's checkout.
func (r *run) sessions() *sessions {
	return &sessions{h: r.h, dir: r.ws.dir, stateDir: r.ws.stateDir, env: r.ws.env, environ: r.opts.Environ, agent: r.opts.Agent,
		taskID: r.order.TaskID, red: r.red, log: r.log}
}

// media is the run's media stage: screenshots of dev.routes, the agent's
// recordings, one media commit.
func (r *run) media() *mediaCapture {
	m := &mediaCapture{dev: r.cfg.Dev, chromium: r.opts.Chromium, ffmpeg: r.opts.FFmpeg, fileCap: r.opts.MediaFileCap, runCap: r.opts.MediaRunCap,
		dir: r.ws.dir, workDir: r.ws.workDir, outputDir: r.order.OutputDir, taskID: r.order.TaskID, env: r.ws.env, agent: r.opts.Agent,
		br: r.br, res: r.res, red: r.red, log: r.log, prog: r.prog}
	if r.ws.browser != nil {
		m.recordings = r.ws.browser.recordings
	}
	return m
}
