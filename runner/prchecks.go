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

// hasBuiltinChecks reports whether the run makes any: only runs that push
// (the others publish nothing to check).
func (r *run) hasBuiltinChecks() bool { return r.git != nil && r.pushes }

// builtinChecks runs them; the secret scan last, because it pushes.
func (r *run) builtinChecks(report func(checkRun)) []checkRun {
	if !r.hasBuiltinChecks() {
		return nil
	}
	var runs []checkRun
	if c, ok := r.planScopeCheck(); ok {
		runs = append(runs, c)
	}
	if c, ok := r.advisoriesCheck(); ok {
		runs = append(runs, c)
	}
	runs = append(runs, r.secretsCheck())
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
