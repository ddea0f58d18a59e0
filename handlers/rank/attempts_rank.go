// Package rank orders the attempts of one approval (--attempts): a pure
// function of what each attempt left, the rule said in Rule.
package rank

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Rule is the rule that picks the attempt a pull request carries,
// as the receipt writes it. rankAttempts is its code.
const Rule = "validation passed, then the checks before the PR clean (secrets, advisories, plan scope), " +
	"then the reviewer's pass without an error where it is on, then the smaller diff (lines, then files), then the lower cost; " +
	"an attempt that failed to start, timed out, was aborted or left no commit ranks last"

// Row is one attempt of an /approve --attempts N as the receipt's
// table shows it and the PR body's attempts marker keeps it (for /pick,
// which needs each attempt's branch and commit after the runs are gone).
type Row struct {
	K      int    `json:"k"`
	TaskID string `json:"task"`
	Branch string `json:"branch"`
	// Head is the commit the attempt left its branch at ("" when none).
	Head string `json:"head,omitempty"`
	// Status is the run's end (completed, failed, timeout, …), or
	// "not started".
	Status string `json:"status"`
	// Out says why the attempt ranks last, "" when it competes.
	Out string `json:"out,omitempty"`
	// Checks are the validate checks: name and whether it passed.
	Checks []Check `json:"checks,omitempty"`
	// Secrets, Advisories and Scope are the checks before the PR: the
	// number of findings, -1 when the check did not run.
	Secrets    int `json:"secrets"`
	Advisories int `json:"advisories"`
	Scope      int `json:"scope"`
	// Review is "" without a reviewer's pass, "ok" or its error.
	Review     string  `json:"review,omitempty"`
	Files      int     `json:"files"`
	Insertions int     `json:"ins"`
	Deletions  int     `json:"del"`
	CostUSD    float64 `json:"cost"`
	Tokens     int64   `json:"tokens"`
	Seconds    float64 `json:"secs"`
}

// Check is one validate check of an attempt.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"ok"`
}

// RowOf is the row of attempt k from its vetted result (nil: the run
// left none); notStarted says why it never ran ("" when it did).
func RowOf(k int, taskID, branch string, res *dispatch.Result, notStarted string) Row {
	row := Row{K: k, TaskID: taskID, Branch: branch, Secrets: -1, Advisories: -1, Scope: -1}
	switch {
	case notStarted != "":
		row.Status, row.Out = "not started", "failed to start: "+notStarted
		return row
	case res == nil:
		row.Status, row.Out = string(dispatch.StatusInterrupted), "left no receipt"
		return row
	}
	row.Status, row.Head = string(res.Status), strings.ToLower(res.HeadSHA)
	for _, c := range res.Validation {
		row.Checks = append(row.Checks, Check{Name: c.Name, Passed: c.Passed})
	}
	if s := res.SecretScan; s != nil {
		row.Secrets = len(s.Findings)
	}
	if d := res.Dependencies; d != nil {
		row.Advisories = len(d.Advisories)
	}
	if p := res.PlanScope; p != nil {
		row.Scope = 0
		for _, o := range p.Outside {
			// An outside change with no reason, or any under plan.strict,
			// is what the plan-scope check reports.
			if p.Strict || o.Reason == "" {
				row.Scope++
			}
		}
	}
	if r := res.Review; r != nil {
		row.Review = cmp.Or(r.Error, "ok")
	}
	row.Files, row.Insertions, row.Deletions = res.DiffStats.FilesChanged, res.DiffStats.Insertions, res.DiffStats.Deletions
	row.CostUSD, row.Seconds = res.TokenUsage.TotalCostUSD, res.DurationSeconds
	u := res.TokenUsage
	row.Tokens = u.Input + u.Output + u.Reasoning + u.CacheRead + u.CacheWrite
	switch {
	case res.Status == dispatch.StatusTimeout:
		row.Out = "timed out"
	case res.Status != dispatch.StatusCompleted && res.Status != dispatch.StatusFailed:
		row.Out = "ended " + string(res.Status)
	case res.Branch == "" || len(res.Commits) == 0 || row.Head == "":
		row.Out = "left no commit"
	}
	return row
}

// validationPassed: every validate check passed (none configured passes).
func (r Row) ValidationPassed() bool {
	return !slices.ContainsFunc(r.Checks, func(c Check) bool { return !c.Passed })
}

// checksClean: no finding in the checks before the PR.
func (r Row) checksClean() bool { return r.Secrets <= 0 && r.Advisories <= 0 && r.Scope <= 0 }

// reviewClean: no reviewer's pass, or one that did not fail.
func (r Row) reviewClean() bool { return r.Review == "" || r.Review == "ok" }

// Lines is the size of the change.
func (r Row) Lines() int { return r.Insertions + r.Deletions }

// rankAttempts orders the attempts best first by Rule; equal ones
// keep their order (the lower k first). It does not change rows.
func Attempts(rows []Row) []Row {
	out := slices.Clone(rows)
	better := func(a, b bool) int {
		switch {
		case a == b:
			return 0
		case a:
			return -1
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b Row) int {
		return cmp.Or(
			better(a.Out == "", b.Out == ""),
			better(a.ValidationPassed(), b.ValidationPassed()),
			better(a.checksClean(), b.checksClean()),
			better(a.reviewClean(), b.reviewClean()),
			cmp.Compare(a.Lines(), b.Lines()),
			cmp.Compare(a.Files, b.Files),
			cmp.Compare(a.CostUSD, b.CostUSD),
			cmp.Compare(a.K, b.K),
		)
	})
	return out
}

// Outcome is the row's outcome in a few words, for the receipt.
func (r Row) Outcome() string {
	switch {
	case r.Out != "":
		return r.Out
	case !r.ValidationPassed():
		var failed []string
		for _, c := range r.Checks {
			if !c.Passed {
				failed = append(failed, c.Name)
			}
		}
		return "failed " + strings.Join(failed, ", ")
	case !r.checksClean():
		return "passed; checks before the PR found something"
	}
	return "passed"
}
