package sandboxcfg

import "cmp"

// CI is what the bot does when the repository's own checks fail on the
// agent's pull request (.sandbox.yml `ci:`): with Fix, a failing head the
// App pushed starts a fix run in revise mode, at most FixAttempts per pull
// request.
type CI struct {
	Fix         *bool `yaml:"fix,omitempty" json:"fix,omitempty" desc:"When the checks on the agent's own head commit of its pull request have all completed and some failed, start a run that fixes them (revise mode), with each failing check's name, annotations and log tail in its prompt. Default false."`
	FixAttempts int   `yaml:"fix_attempts,omitempty" json:"fix_attempts,omitempty" desc:"Fix runs per pull request at most; after the last one the bot says what still fails. Default 2, bounded by the server's limits.max_ci_fix_attempts." min:"1" max:"10"`
}

// ResolvedCI is CI with its defaults applied (Resolved).
type ResolvedCI struct {
	Fix         bool `json:"fix"`
	FixAttempts int  `json:"fix_attempts"`
}

// Defaults and bounds of the CI fix.
const (
	DefaultCIFixAttempts = 2
	// CeilingCIFixAttempts is limits.max_ci_fix_attempts when the
	// operator sets none.
	CeilingCIFixAttempts = 3
	maxCIFixAttempts     = 10
)

func (c CI) set() bool { return c.Fix != nil || c.FixAttempts != 0 }

func (c CI) resolve() ResolvedCI {
	return ResolvedCI{Fix: c.Fix != nil && *c.Fix, FixAttempts: cmp.Or(c.FixAttempts, DefaultCIFixAttempts)}
}

func (r ResolvedCI) layer() CI {
	fix := r.Fix
	return CI{Fix: &fix, FixAttempts: r.FixAttempts}
}

func (c *CI) merge(over CI) {
	if over.Fix != nil {
		c.Fix = over.Fix
	}
	if over.FixAttempts != 0 {
		c.FixAttempts = over.FixAttempts
	}
}

func (c CI) validate(bad report) {
	if c.FixAttempts < 0 || c.FixAttempts > maxCIFixAttempts {
		bad("ci.fix_attempts", "must be between 1 and %d, got %d", maxCIFixAttempts, c.FixAttempts)
	}
}

// Reports says what of an issue written by someone without write access
// reaches the agent once a writer vouched for it (labeled it or mentioned
// the App on it): its title and body as the reporter's quoted words with
// hidden content removed, or, strict, nothing but "Issue #N".
type Reports struct {
	Outsiders string `yaml:"outsiders,omitempty" json:"outsiders,omitempty" desc:"An issue by someone without write access, once a writer labels it or mentions the App on it: quoted (default) hands its title and body to the agent as the reporter's quoted words, as GitHub rendered them (what a reader sees, nothing the Markdown hides), frozen at the vouch; strict hands only \"Issue #N\". Comments by people without write access never reach the agent either way." enum:"quoted,strict"`
}

// ResolvedReports is Reports with its default applied (Resolved).
type ResolvedReports struct {
	Outsiders string `json:"outsiders"`
}

// The values of reports.outsiders.
const (
	OutsidersQuoted = "quoted"
	OutsidersStrict = "strict"
)

// Quoted reports whether an outsider's vouched issue reaches the agent as
// their quoted words.
func (r ResolvedReports) Quoted() bool { return r.Outsiders == OutsidersQuoted }

func (r Reports) set() bool { return r.Outsiders != "" }

func (r Reports) resolve() ResolvedReports {
	return ResolvedReports{Outsiders: cmp.Or(r.Outsiders, OutsidersQuoted)}
}

func (r ResolvedReports) layer() Reports { return Reports{Outsiders: r.Outsiders} }

func (r *Reports) merge(over Reports) {
	if over.Outsiders != "" {
		r.Outsiders = over.Outsiders
	}
}

func (r Reports) validate(bad report) {
	if r.Outsiders != "" && r.Outsiders != OutsidersQuoted && r.Outsiders != OutsidersStrict {
		bad("reports.outsiders", "must be quoted or strict, got %q", r.Outsiders)
	}
}

// boundTrust applies the server's ceilings that a layer which says
// nothing takes as its value: the strict reading of outsiders' issues, and
// no more CI fix attempts than the ceiling. It reports the keys it set.
func (l Limits) boundTrust(c *Config) []string {
	var set []string
	if l.OutsiderReports == OutsidersStrict && c.Reports.Outsiders == "" {
		c.Reports.Outsiders = OutsidersStrict
		set = append(set, "reports")
	}
	if c.CI.FixAttempts == 0 && l.MaxCIFixAttempts > 0 && l.MaxCIFixAttempts < DefaultCIFixAttempts {
		c.CI.FixAttempts = l.MaxCIFixAttempts
		set = append(set, "ci")
	}
	return set
}

// checkTrust holds a resolved configuration to the ceilings of ci and
// reports.
func (l Limits) checkTrust(c *Resolved, bad func(field, format string, args ...any)) {
	if c.CI.Fix && l.AllowCIFix != nil && !*l.AllowCIFix {
		bad("ci.fix", "CI fix runs are not allowed on this server (limits.allow_ci_fix)")
	}
	if l.MaxCIFixAttempts > 0 && c.CI.FixAttempts > l.MaxCIFixAttempts {
		bad("ci.fix_attempts", "%d is over the server ceiling of %d (limits.max_ci_fix_attempts)", c.CI.FixAttempts, l.MaxCIFixAttempts)
	}
	if l.OutsiderReports == OutsidersStrict && c.Reports.Outsiders != OutsidersStrict {
		bad("reports.outsiders", "%q is over the server ceiling: limits.outsider_reports is strict, so an outsider's issue reaches the agent as \"Issue #N\" only", c.Reports.Outsiders)
	}
}
