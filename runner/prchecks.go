package runner

import (
	"sort"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// The checks before the pull request that the runner itself makes, after
// the project's own: the change against the approved plan (with
// plan.strict), known advisories of the dependencies it adds, and the
// secret scan of what it would push. A failing one goes to the repair
// loop like a failing test; it is listed in the receipt's validation only
// once it has failed, its findings always in the receipt's own sections.

func builtinCheck(name, what string) sandboxcfg.Check {
	return sandboxcfg.Check{Name: name, Command: "built in: " + what}
}

// builtinChecks runs them; the secret scan last, because it pushes.
func (r *run) builtinChecks(report func(checkRun)) []checkRun {
	if r.deps == nil {
		// Only runs that push make them (the others publish nothing to
		// check); deps is made for every one of them.
		return nil
	}
	var runs []checkRun
	if c, ok := r.scope.check(r.work); ok {
		runs = append(runs, c)
	}
	if c, ok := r.deps.check(r.work); ok {
		runs = append(runs, c)
	}
	var pushed error
	if r.spec.pushAtMilestones {
		pushed = r.br.push(r.work)
	} else {
		// A mode that pushes once, at its end (rebase), is scanned now
		// and pushed then.
		pushed = r.br.gateOnly(r.work)
	}
	runs = append(runs, secretsCheck(pushed, r.red))
	for _, c := range runs {
		if _, listed := r.checks[c.Check.Name]; listed || !c.Passed {
			report(c)
		}
	}
	return runs
}

func sortSecretFindings(fs []dispatch.SecretFinding) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].File != fs[j].File {
			return fs[i].File < fs[j].File
		}
		if fs[i].Line != fs[j].Line {
			return fs[i].Line < fs[j].Line
		}
		return fs[i].Rule < fs[j].Rule
	})
}
