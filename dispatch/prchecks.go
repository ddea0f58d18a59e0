package dispatch

import "github.com/sandbox-bot/sandbox-bot/dispatch/termtext"

// The checks before the pull request (issue 24): what the runner found in
// the change besides the project's own checks. Each is an additive part of
// result.json (ResultVersion stays 1); the bot vets every text of them
// before it posts anything.

// The names the built-in checks have in Result.Validation (and in the
// repair prompt). A repository's own check names are YAML keys without a
// slash convention; these carry the "sandbox/" prefix so none collides.
const (
	CheckSecrets    = "sandbox/secrets"
	CheckAdvisories = "sandbox/advisories"
	CheckPlanScope  = "sandbox/plan-scope"
)

// SecretScan is the scan of the commits the runner was about to push.
type SecretScan struct {
	// Scanner names the scanner and its rules, e.g. "gitleaks 8.30.1
	// (default rules, entropy) + the run's own secrets".
	Scanner string `json:"scanner"`
	// Commits is how many commits were scanned over the run.
	Commits int `json:"commits"`
	// Findings still blocked the push when the run ended: nothing of them
	// was pushed. Never the value: rule and place only.
	Findings []SecretFinding `json:"findings,omitempty"`
	// Allowed are findings an allowlist of the repository accepts
	// (.gitleaksignore, .gitleaks.toml, .sandbox.yml secrets.allow):
	// reported, not blocking.
	Allowed []SecretFinding `json:"allowed,omitempty"`
	// Repaired counts findings the repair loop removed before any push.
	Repaired int `json:"repaired,omitempty"`
	// Squashed is how many unpushed commits were rewritten into one so
	// that a secret removed by a repair is not pushed in the history.
	Squashed int `json:"squashed,omitempty"`
}

// SecretFinding is one place a rule matched: never the matched text.
type SecretFinding struct {
	Rule        string `json:"rule"`
	Description string `json:"description,omitempty"`
	File        string `json:"file"`
	Line        int    `json:"line"`
	Commit      string `json:"commit,omitempty"`
	// Allowlist names what accepted it (Allowed only).
	Allowlist string `json:"allowlist,omitempty"`
}

// Dependencies is the change of dependencies between the base and the
// result, for the ecosystems the runner reads.
type Dependencies struct {
	Changes []DependencyChange `json:"changes,omitempty"`
	// Advisories are known advisories (from the operator's offline OSV
	// database) for versions the change adds.
	Advisories []Advisory `json:"advisories,omitempty"`
	// AdvisoryDB says what was checked: "none configured", or the
	// database's size.
	AdvisoryDB string `json:"advisory_db,omitempty"`
	// Errors are manifests the runner could not read (parse errors).
	Errors []string `json:"errors,omitempty"`
}

// DependencyChange kinds.
const (
	DepAdded   = "added"
	DepRemoved = "removed"
	DepChanged = "changed"
)

// DependencyChange is one dependency added, removed or changed.
type DependencyChange struct {
	Ecosystem string `json:"ecosystem"` // Go, npm, PyPI, crates.io (OSV's names)
	Name      string `json:"name"`
	Change    string `json:"change"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
	Manifest  string `json:"manifest"`
}

// Advisory is one known advisory matching a version the change adds.
type Advisory struct {
	ID        string `json:"id"`
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Summary   string `json:"summary,omitempty"`
	// Fixed is the first version without it, when the database says.
	Fixed string `json:"fixed,omitempty"`
}

// PlanFile is one file or area an approved plan names: a path, a
// directory (ending in /) or a glob.
type PlanFile struct {
	Path string `json:"path"`
	Note string `json:"note,omitempty"`
}

// PlanScope compares the change with the approved plan's files.
type PlanScope struct {
	// Items are the plan's entries with the changed files each covers.
	Items []PlanItem `json:"items,omitempty"`
	// Outside are changed files no entry covers, with the agent's reason.
	Outside []OutsideChange `json:"outside,omitempty"`
	// Strict is plan.strict: an outside change failed validation.
	Strict bool `json:"strict,omitempty"`
}

// PlanItem is one entry of the plan and what was done about it.
type PlanItem struct {
	Path    string   `json:"path"`
	Note    string   `json:"note,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// OutsideChange is a changed file the plan did not name.
type OutsideChange struct {
	File   string `json:"file"`
	Reason string `json:"reason,omitempty"`
}

// Review is the reviewer's pass: a fresh read-only agent session's short
// review of the change, which never changes the code.
type Review struct {
	Harness string  `json:"harness,omitempty"`
	Model   string  `json:"model,omitempty"`
	Text    string  `json:"text,omitempty"`
	CostUSD float64 `json:"cost_usd"`
	// Error says why there is no review (it failed, ran out of its
	// budget, changed files, which were discarded).
	Error string `json:"error,omitempty"`
}

// cleanChecks strips terminal escapes from the texts of the checks.
func (r *Result) cleanChecks() {
	if s := r.SecretScan; s != nil {
		s.Scanner = termtext.Clean(s.Scanner)
		for _, fs := range [][]SecretFinding{s.Findings, s.Allowed} {
			for i := range fs {
				f := &fs[i]
				f.Rule, f.Description, f.File, f.Commit, f.Allowlist = termtext.Clean(f.Rule), termtext.Clean(f.Description), termtext.Clean(f.File), termtext.Clean(f.Commit), termtext.Clean(f.Allowlist)
			}
		}
	}
	if d := r.Dependencies; d != nil {
		for i := range d.Changes {
			c := &d.Changes[i]
			c.Ecosystem, c.Name, c.From, c.To, c.Manifest = termtext.Clean(c.Ecosystem), termtext.Clean(c.Name), termtext.Clean(c.From), termtext.Clean(c.To), termtext.Clean(c.Manifest)
		}
		for i := range d.Advisories {
			a := &d.Advisories[i]
			a.ID, a.Name, a.Version, a.Summary, a.Fixed = termtext.Clean(a.ID), termtext.Clean(a.Name), termtext.Clean(a.Version), termtext.Clean(a.Summary), termtext.Clean(a.Fixed)
		}
		d.AdvisoryDB = termtext.Clean(d.AdvisoryDB)
		cleanAll(d.Errors)
	}
	for i := range r.PlanFiles {
		r.PlanFiles[i].Path, r.PlanFiles[i].Note = termtext.Clean(r.PlanFiles[i].Path), termtext.Clean(r.PlanFiles[i].Note)
	}
	if p := r.PlanScope; p != nil {
		for i := range p.Items {
			p.Items[i].Path, p.Items[i].Note = termtext.Clean(p.Items[i].Path), termtext.Clean(p.Items[i].Note)
			cleanAll(p.Items[i].Changed)
		}
		for i := range p.Outside {
			p.Outside[i].File, p.Outside[i].Reason = termtext.Clean(p.Outside[i].File), termtext.Clean(p.Outside[i].Reason)
		}
	}
	if v := r.Review; v != nil {
		v.Harness, v.Model, v.Text, v.Error = termtext.Clean(v.Harness), termtext.Clean(v.Model), termtext.Clean(v.Text), termtext.Clean(v.Error)
	}
}
