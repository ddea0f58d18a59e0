package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The CLI's summary names what the checks before the PR found.
func TestReportChecks(t *testing.T) {
	var b bytes.Buffer
	reportChecks(&b, &dispatch.Result{
		SecretScan:   &dispatch.SecretScan{Commits: 2, Repaired: 1, Findings: []dispatch.SecretFinding{{Rule: "aws-access-token", File: "cfg.go", Line: 3}}},
		Dependencies: &dispatch.Dependencies{Changes: []dispatch.DependencyChange{{Change: "added", Ecosystem: "npm", Name: "left-pad", To: "1.3.1", Manifest: "package-lock.json"}}},
		PlanScope:    &dispatch.PlanScope{Outside: []dispatch.OutsideChange{{File: "Makefile", Reason: "a target"}}},
		Review:       &dispatch.Review{Text: "Looks fine.", CostUSD: 0.02},
	})
	for _, want := range []string{"held: aws-access-token at cfg.go:3", "added npm left-pad  → 1.3.1", "outside:  Makefile", "review:   $0.0200: Looks fine."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
