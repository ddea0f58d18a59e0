package runner

import (
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// validateAndRepair runs the checks and, when the main task succeeded,
// gives the agent the failing checks' output up to repair.attempts times
// within the repair budget.
func (r *run) validateAndRepair(mainOK bool) error {
	if len(r.cfg.Validate) == 0 && r.deps == nil { // no checks of the project, none built in
		return nil
	}
	runs := r.validate()
	if r.work.Err() != nil {
		return r.ag.interruption(nil)
	}
	attempts := r.cfg.Repair.Attempts
	if r.spec.personsBranch {
		attempts = 0 // one commit on a person's branch
	}
	for i := 1; i <= attempts && mainOK && len(failing(runs)) > 0; i++ {
		bad := failing(runs)
		rep := dispatch.Repair{Attempt: i}
		data := r.promptData()
		data.Continuing = r.ag.session != ""
		data.Attempt, data.MaxAttempts = i, attempts
		for _, f := range bad {
			rep.FailedChecks = append(rep.FailedChecks, f.Check.Name)
			data.Failed = append(data.Failed, FailedCheck{Name: f.Check.Name, Command: f.Check.Command, Tail: f.Tail, TimedOut: f.TimedOut})
		}
		if r.ag.repairBudget-r.ag.repairCost <= 0 {
			return &statusError{status: dispatch.StatusBudgetExceeded, msg: fmt.Sprintf("the repair budget ($%.2f) is used up with checks still failing: %s", r.ag.repairBudget, strings.Join(rep.FailedChecks, ", "))}
		}
		prompt, err := render(r.opts.Templates, PromptRepair, data)
		if err != nil {
			return err
		}
		r.prog.emit(dispatch.Progress{Stage: "repair", Message: fmt.Sprintf("repair %d/%d: %s", i, attempts, strings.Join(rep.FailedChecks, ", "))})
		before := r.ag.repairCost
		out, aerr := r.ag.agent(agentSpec{Stage: "repair", Prompt: prompt, SessionID: r.ag.session})
		rep.CostUSD = r.ag.repairCost - before
		if r.ws.git != nil {
			if err := r.br.milestone(r.work, fmt.Sprintf("Fix failing checks: %s (repair %d)\n\nTask: %s", strings.Join(rep.FailedChecks, ", "), i, r.order.TaskID)); err != nil {
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
			return r.ag.interruption(nil)
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
	if r.ws.git != nil {
		defer func() {
			r.br.mu.Lock()
			defer r.br.mu.Unlock()
			left, err := r.ws.git.Untracked(r.work)
			if err == nil && len(left) > 0 {
				r.log.Info().Strs("files", clipList(left, 20)).Msg("excluding files the checks left from commits")
				pats := make([]string, len(left))
				for i, l := range left {
					pats[i] = literalPattern(l)
				}
				if err := r.ws.git.Exclude(pats...); err != nil {
					r.log.Warn().Err(err).Msg("could not exclude the checks' byproducts")
				}
			}
		}()
	}
	report := func(c checkRun) {
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
		r.prog.emit(dispatch.Progress{Stage: "validate", Message: fmt.Sprintf("%s %s", c.Check.Name, verdict),
			Kind: dispatch.KindCheck, Detail: c.Tail})
	}
	runs := runChecks(r.work, r.ws.dir, r.ws.env, r.opts.Agent, r.cfg.Validate, r.red, report)
	if r.work.Err() != nil {
		return runs
	}
	return append(runs, r.builtinChecks(report)...)
}
