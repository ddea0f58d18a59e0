package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// burst labels n issues at once on a fake GitHub that applies a secondary
// rate limit, finishes every plan run as it is submitted, and waits until
// every issue has its plan. It fails on a duplicate comment or a failure
// label, and returns how long the burst took and what the fake refused.
func burst(t *testing.T, issues int, limit githubtest.RateLimit, writesPerMinute int) (time.Duration, int) {
	t.Helper()
	gh := githubtest.New(t, githubtest.Options{SecondaryLimit: limit})
	h := newHarnessOn(t, gh, nil, map[string]string{"SANDBOX_GITHUB_WRITES_PER_MINUTE": fmt.Sprint(writesPerMinute)})
	var numbers []int
	for i := range issues {
		numbers = append(numbers, h.gh.AddIssue(testRepo, writer, fmt.Sprintf("Task %d", i), "Do it."))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, n := range numbers {
		wg.Go(func() {
			if code := h.label(n, writer, fmt.Sprintf("d-burst-%d", n)); code != http.StatusOK {
				t.Errorf("label #%d answered %d", n, code)
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	specs, err := h.backend.WaitSubmitted(ctx, issues)
	if err != nil {
		t.Fatalf("%d of %d plan runs submitted: %v", len(specs), issues, err)
	}
	for _, s := range specs {
		h.backend.Finish(s.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted,
			Plan: "1. Do " + s.Order.Task.Title, TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.01, Steps: 1}})
	}
	h.gh.WaitFor(3*time.Minute, "every plan posted", func() bool {
		for _, n := range numbers {
			if !hasLabel(h.gh.Issue(testRepo, n).Labels, "agent:awaiting-approval") {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	h.idle()
	for _, n := range numbers {
		var plans int
		comments := h.botComments(n)
		for _, c := range comments {
			if strings.Contains(c, "## 📋 Plan") {
				plans++
			}
		}
		if plans != 1 || len(comments) != 2 {
			t.Errorf("#%d: %d plan comments of %d bot comments, want 1 of 2 (acknowledgement and plan)", n, plans, len(comments))
		}
		if labels := h.gh.Issue(testRepo, n).Labels; hasLabel(labels, "agent:failed") {
			t.Errorf("#%d labeled agent:failed: %v", n, labels)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warn"`) {
				t.Log(l)
			}
		}
	}
	_, refused := gh.RateLimited()
	return took, refused
}

// A burst of labeled issues under a secondary limit scaled to 10 writes a
// second: the bot paces itself below it and every issue gets its plan.
func TestBurstUnderSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	took, refused := burst(t, 8, githubtest.RateLimit{Writes: 10, Per: time.Second}, 8*60)
	t.Logf("8 plans under 10 writes/s, paced at 8/s: %v, %d writes refused", took, refused)
}

// Paced far above the limit, the bot meets GitHub's 403s; it waits out
// each Retry-After and sends again, and nothing is dropped.
func TestBurstHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	took, refused := burst(t, 8, githubtest.RateLimit{Writes: 10, Per: time.Second}, 60*1000)
	if refused == 0 {
		t.Fatal("the fake refused nothing: the test did not reach the limit")
	}
	t.Logf("8 plans under 10 writes/s, unpaced: %v, %d writes refused and retried", took, refused)
}

// 24 issues against GitHub's own figure, 80 writes a minute, with the
// minute scaled to 6 s; beside the same burst without a limit.
func TestBurstOf24UnderGitHubsLimit(t *testing.T) {
	testenv.Long(t, "24 plans under a rate limit take about 20 s")
	t.Parallel()
	limited, refused := burst(t, 24, githubtest.RateLimit{Writes: 80, Per: 6 * time.Second}, 60*10)
	free, _ := burst(t, 24, githubtest.RateLimit{}, 60*1000)
	t.Logf("24 plans: %v under 80 writes per 6 s (%d refused), %v without a limit", limited, refused, free)
}

// A result GitHub refused to take is tried again until it lands, once;
// one still refused when the bot stops is posted by the next bot.
func TestResultPostedAfterGitHubRefusedIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "")
	h.label(n, writer, "d-refused-1")
	plan := h.waitSubmitted(1)[0]
	h.gh.WaitFor(5*time.Second, "ack", func() bool { return len(h.botComments(n)) == 1 })

	// Three 502s, then GitHub is back: the same bot posts the plan.
	h.gh.FailNext("POST", fmt.Sprintf("/issues/%d/comments", n), http.StatusBadGateway, 3)
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Greet."})
	h.waitComment(n, "plan after three refusals", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.idle()
	if got := len(h.botComments(n)); got != 2 {
		t.Errorf("%d bot comments, want the acknowledgement and one plan", got)
	}

	// Refused until the bot stops: the next bot posts it, once.
	m := h.gh.AddIssue(testRepo, writer, "Add a farewell endpoint", "")
	h.label(m, writer, "d-refused-2")
	second := h.waitSubmitted(2)[1]
	h.gh.WaitFor(5*time.Second, "ack", func() bool { return len(h.botComments(m)) == 1 })
	h.gh.FailNext("POST", fmt.Sprintf("/issues/%d/comments", m), http.StatusBadGateway, 1000)
	h.backend.Finish(second.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Wave."})
	h.gh.WaitFor(10*time.Second, "a refused post", func() bool { return h.gh.Injected() > 0 })
	h.stop()
	if got := len(h.botComments(m)); got != 1 {
		t.Fatalf("%d bot comments before the restart, want the acknowledgement only", got)
	}
	h.gh.ClearFaults()
	h.start(nil)
	h.waitComment(m, "plan posted by the restarted bot", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.idle()
	if got := len(h.botComments(m)); got != 2 {
		t.Errorf("%d bot comments after the restart, want the acknowledgement and one plan", got)
	}
}

// Runs ending together while the installation's pace is spent post their
// plans first: the plans go before the state labels of the runs that ended
// (each a write that waited behind its own run's result), at the same
// pace. Before the results went first, every run's two label writes and
// the progress comment's last edit went before its plan, and the last
// plan waited behind all of them.
func TestBurstPostsThePlansBeforeTheirLabels(t *testing.T) {
	testenv.Long(t, "12 plans at 5 writes a second take about 15 s")
	t.Parallel()
	const issues = 12
	h := newHarness(t, nil, map[string]string{"SANDBOX_GITHUB_WRITES_PER_MINUTE": "300"})
	var numbers []int
	for i := range issues {
		numbers = append(numbers, h.gh.AddIssue(testRepo, writer, fmt.Sprintf("Task %d", i), "Do it."))
	}
	for _, n := range numbers {
		go h.label(n, writer, fmt.Sprintf("d-together-%d", n))
	}
	specs := h.waitSubmitted(issues)
	h.gh.WaitFor(time.Minute, "every acknowledgement", func() bool {
		for _, n := range numbers {
			if len(h.botComments(n)) != 1 {
				return false
			}
		}
		return true
	})
	for _, s := range specs {
		h.backend.Finish(s.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do " + s.Order.Task.Title})
	}
	h.gh.WaitFor(time.Minute, "every plan and its label", func() bool {
		for _, n := range numbers {
			if !hasLabel(h.gh.Issue(testRepo, n).Labels, "agent:awaiting-approval") {
				return false
			}
		}
		return true
	})
	h.idle()
	var order []string
	lastPlan, labelsBefore := -1, 0
	for _, r := range h.gh.Requests() {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/comments") && strings.Contains(string(r.Body), "📋 Plan"):
			lastPlan = len(order)
			order = append(order, "plan "+r.Path)
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/labels") && strings.Contains(string(r.Body), "agent:awaiting-approval"):
			order = append(order, "label "+r.Path)
		}
	}
	for _, o := range order[:lastPlan+1] {
		if strings.HasPrefix(o, "label ") {
			labelsBefore++
		}
	}
	if lastPlan < 0 || labelsBefore >= issues/4 {
		t.Fatalf("%d of %d state labels went before the last plan, want (almost) none:\n%s", labelsBefore, issues, strings.Join(order, "\n"))
	}
	t.Logf("%d of %d state labels went before the last plan", labelsBefore, issues)
}
