package rank

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// TestRankAttempts: the rule, key by key, each deciding only when the
// keys before it tie; attempts that did not run to an end rank last.
func TestRankAttempts(t *testing.T) {
	pass := []Check{{Name: "test", Passed: true}}
	fail := []Check{{Name: "test", Passed: false}}
	row := func(k int, checks []Check, lines int) Row {
		return Row{K: k, Head: "h", Checks: checks, Insertions: lines, Files: 1, Secrets: 0, Advisories: -1, Scope: -1}
	}
	for _, tc := range []struct {
		name string
		rows []Row
		want []int
	}{
		{"validation first, then the smaller diff", []Row{row(1, fail, 2), row(2, pass, 40), row(3, pass, 5)}, []int{3, 2, 1}},
		{"checks before the PR beat size", func() []Row {
			a, b := row(1, pass, 2), row(2, pass, 50)
			a.Secrets = 1
			return []Row{a, b}
		}(), []int{2, 1}},
		{"the reviewer's failed pass beats size", func() []Row {
			a, b := row(1, pass, 2), row(2, pass, 50)
			a.Review, b.Review = "the reviewer ran out of budget", "ok"
			return []Row{a, b}
		}(), []int{2, 1}},
		{"equal lines: fewer files, then lower cost, then k", func() []Row {
			a, b, c, d := row(1, pass, 10), row(2, pass, 10), row(3, pass, 10), row(4, pass, 10)
			a.Files, b.CostUSD, c.CostUSD, d.CostUSD = 3, 0.5, 0.2, 0.2
			return []Row{a, b, c, d}
		}(), []int{3, 4, 2, 1}},
		{"ended badly ranks last even when smaller", func() []Row {
			a := RowOf(1, "T-1", "b1", &dispatch.Result{Status: dispatch.StatusTimeout, Branch: "b1", HeadSHA: "h", Commits: []dispatch.Commit{{SHA: "h"}}}, "")
			b := RowOf(2, "", "b2", nil, "the backend refused it")
			c := row(3, fail, 90)
			return []Row{a, b, c}
		}(), []int{3, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Attempts(tc.rows)
			for i, k := range tc.want {
				if got[i].K != k {
					t.Fatalf("ranked %v, want %v", ks(got), tc.want)
				}
			}
		})
	}
	if r := RowOf(1, "T-1", "b", &dispatch.Result{Status: dispatch.StatusTimeout}, ""); r.Out != "timed out" || r.Outcome() != "timed out" {
		t.Errorf("a timed-out attempt says %q (%q)", r.Out, r.Outcome())
	}
	if r := RowOf(2, "", "b", nil, "no slot"); r.Outcome() != "failed to start: no slot" {
		t.Errorf("an attempt that did not start says %q", r.Outcome())
	}
}

func ks(rows []Row) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.K
	}
	return out
}
