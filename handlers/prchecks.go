package handlers

import (
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The PR body's checks before the PR (github/pr_checks: the change against
// the approved plan, dependencies, the secret scan, the reviewer's pass)
// sit between markers, so that a later completed run on the PR (revise,
// continue) replaces them with its own, the way the runs section is kept.
const (
	checksStart = "<!-- sandbox-bot:checks-start -->"
	checksEnd   = "<!-- sandbox-bot:checks-end -->"
)

// PRChecksData is github/pr_checks: a vetted receipt's checks.
type PRChecksData struct {
	Result *dispatch.Result
}

// hasChecks reports whether a receipt has any of the checks to show.
func hasChecks(res *dispatch.Result) bool {
	return res != nil && (res.PlanScope != nil || res.Dependencies != nil || res.SecretScan != nil || res.Review != nil)
}

// renderChecks is the body's checks section with its markers, "" when the
// receipt has none (or the template fails: the body goes without).
func (c *core) renderChecks(res *dispatch.Result) (string, error) {
	if !hasChecks(res) {
		return "", nil
	}
	text, err := c.Templates.Render("github/pr_checks", PRChecksData{Result: res})
	if err != nil {
		return "", err
	}
	return checksStart + "\n" + strings.TrimSpace(text) + "\n" + checksEnd, nil
}

// spliceChecks puts section in place of the body's checks, before the
// runs section when the body has none yet.
func spliceChecks(body, section string) string {
	if before, rest, ok := strings.Cut(body, checksStart); ok {
		_, after, _ := strings.Cut(rest, checksEnd)
		return before + section + after
	}
	if before, after, ok := strings.Cut(body, historyStart); ok {
		return before + section + "\n\n" + historyStart + after
	}
	return strings.TrimRight(body, "\n") + "\n\n" + section + "\n"
}
