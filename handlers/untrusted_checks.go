package handlers

import (
	"math"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// The receipt's checks before the PR (dispatch/prchecks.go) are the
// sandbox's word like the rest of it: every text is redacted, made one
// line without backticks or pipes, cut, and every list bounded, before a
// PR body, a comment or a marker shows it. Numbers are kept only when
// they are sane.
const (
	maxSecretFindings = 50
	maxDepChanges     = 100
	maxAdvisories     = 50
	maxPlanEntries    = 50
	maxPlanChanged    = 20
	maxOutside        = 100
	maxReviewBytes    = 8000
	maxPathLen        = 200
)

// vetChecks cleans the checks' parts of cp (a copy of res).
func vetChecks(cp, res *dispatch.Result, redact func(string) string) {
	// One line of the agent's text: what sanitizeMarkdown makes visible
	// and harmless (mentions, HTML), then one table-safe line.
	line := func(s string, max int) string {
		return sanitize.Inline(sanitize.Markdown(sanitize.TruncateUTF8(redact(s), 4*max), 4*max), max)
	}
	cp.SecretScan = vetSecretScan(res.SecretScan, line)
	cp.Dependencies = vetDependencies(res.Dependencies, line)
	cp.PlanFiles = vetPlanFiles(res.PlanFiles, line)
	cp.PlanScope = vetPlanScope(res.PlanScope, line)
	if v := res.Review; v != nil {
		cp.Review = &dispatch.Review{
			Harness: line(v.Harness, 40), Model: line(v.Model, 100), Error: line(v.Error, 500),
			Text:    strings.TrimSpace(sanitize.Markdown(redact(v.Text), maxReviewBytes)),
			CostUSD: saneCost(v.CostUSD),
		}
	}
}

func vetSecretScan(s *dispatch.SecretScan, line func(string, int) string) *dispatch.SecretScan {
	if s == nil {
		return nil
	}
	out := &dispatch.SecretScan{Scanner: line(s.Scanner, 200), Commits: max(s.Commits, 0), Repaired: max(s.Repaired, 0), Squashed: max(s.Squashed, 0)}
	vet := func(fs []dispatch.SecretFinding) []dispatch.SecretFinding {
		var kept []dispatch.SecretFinding
		for _, f := range fs {
			if len(kept) == maxSecretFindings {
				break
			}
			commit := f.Commit
			if !shaRE.MatchString(commit) {
				commit = ""
			}
			kept = append(kept, dispatch.SecretFinding{Rule: line(f.Rule, 80), Description: line(f.Description, 200),
				File: line(f.File, maxPathLen), Line: max(f.Line, 0), Commit: commit, Allowlist: line(f.Allowlist, 100)})
		}
		return kept
	}
	out.Findings, out.Allowed = vet(s.Findings), vet(s.Allowed)
	return out
}

func vetDependencies(d *dispatch.Dependencies, line func(string, int) string) *dispatch.Dependencies {
	if d == nil {
		return nil
	}
	out := &dispatch.Dependencies{AdvisoryDB: line(d.AdvisoryDB, 200)}
	for i, c := range d.Changes {
		if i == maxDepChanges {
			break
		}
		out.Changes = append(out.Changes, dispatch.DependencyChange{Ecosystem: line(c.Ecosystem, 20), Name: line(c.Name, maxPathLen),
			Change: line(c.Change, 10), From: line(c.From, 100), To: line(c.To, 100), Manifest: line(c.Manifest, maxPathLen)})
	}
	for i, a := range d.Advisories {
		if i == maxAdvisories {
			break
		}
		out.Advisories = append(out.Advisories, dispatch.Advisory{ID: line(a.ID, 60), Ecosystem: line(a.Ecosystem, 20), Name: line(a.Name, maxPathLen),
			Version: line(a.Version, 100), Summary: line(a.Summary, 300), Fixed: line(a.Fixed, 100)})
	}
	for i, e := range d.Errors {
		if i == 10 {
			break
		}
		out.Errors = append(out.Errors, line(e, 300))
	}
	return out
}

func vetPlanFiles(fs []dispatch.PlanFile, line func(string, int) string) []dispatch.PlanFile {
	var out []dispatch.PlanFile
	for _, f := range fs {
		if len(out) == maxPlanEntries {
			break
		}
		if p := line(f.Path, maxPathLen); p != "" {
			out = append(out, dispatch.PlanFile{Path: p, Note: line(f.Note, 120)})
		}
	}
	return out
}

func vetPlanScope(p *dispatch.PlanScope, line func(string, int) string) *dispatch.PlanScope {
	if p == nil {
		return nil
	}
	out := &dispatch.PlanScope{Strict: p.Strict}
	for i, it := range p.Items {
		if i == maxPlanEntries {
			break
		}
		item := dispatch.PlanItem{Path: line(it.Path, maxPathLen), Note: line(it.Note, 120)}
		for j, c := range it.Changed {
			if j == maxPlanChanged {
				break
			}
			item.Changed = append(item.Changed, line(c, maxPathLen))
		}
		out.Items = append(out.Items, item)
	}
	for i, o := range p.Outside {
		if i == maxOutside {
			break
		}
		out.Outside = append(out.Outside, dispatch.OutsideChange{File: line(o.File, maxPathLen), Reason: line(o.Reason, 200)})
	}
	return out
}

// saneCost keeps a cost a receipt may show: finite, not negative, below
// any budget a server allows.
func saneCost(c float64) float64 {
	if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 || c > 1e6 {
		return 0
	}
	return c
}
