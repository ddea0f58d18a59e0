package handlers

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/reviewtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The review's body stays within GitHub's 65,536 characters and shows no
// terminal escape or hidden HTML, however long and whatever the agent and
// the checks wrote.
func TestReviewBodyIsBoundedAndClean(t *testing.T) {
	set := templates.MustLoadEmbedded()
	summary := strings.Repeat("A long review line with <!-- hidden --> and \x1b[31mred\x1b[0m.\n", 5000)
	res := &dispatch.Result{DurationSeconds: 61, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 1.5}}
	for i := range 40 {
		res.Validation = append(res.Validation, dispatch.CheckResult{Name: "check", Command: "make test", OutputTail: strings.Repeat("x_test.go:1: FAIL \x1b[31mboom\x1b[0m "+strings.Repeat("y", 400)+"\n", 50)})
		res.Validation[i].Passed = i%2 == 0
	}
	res.CleanText()
	body, err := set.Render("github/review", reviewData("<!-- m -->", summary, 3, strings.Repeat("a", 40), res, "https://bot.example/runs/T-1"))
	if err != nil {
		t.Fatal(err)
	}
	body = sanitize.TruncateUTF8(body, reviewtext.MaxReviewBody)
	if len(body) > 65536 {
		t.Errorf("the body is %d bytes", len(body))
	}
	if strings.Contains(body, "\x1b") || strings.Contains(body, "<!-- hidden") {
		t.Errorf("the body shows an escape or hidden HTML")
	}
	if !strings.Contains(body, "$1.50") || !strings.Contains(body, "https://bot.example/runs/T-1") {
		t.Errorf("the body lacks the cost or the run's link:\n%s", body[len(body)-400:])
	}
}
