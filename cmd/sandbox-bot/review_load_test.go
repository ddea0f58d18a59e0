package main

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestReviewStartLoad is issue 42's figure: on a repository's later runs,
// a writer's /review on a person's pull request → the agent's first model
// request, beside a label → the plan run's first model request, through
// the bot on Docker with the real image and OpenCode on the scripted
// model, alternating, the load printed. The project has no validation, so
// both runs go from the event to the agent. Hand-run:
// SANDBOX_REVIEWLOAD=1 (rounds: SANDBOX_REVIEWLOAD_ROUNDS, default 3).
func TestReviewStartLoad(t *testing.T) {
	if os.Getenv("SANDBOX_REVIEWLOAD") == "" {
		t.Skip("hand-run load test: set SANDBOX_REVIEWLOAD=1")
	}
	l := startLoop(t, loopOptions{repoFiles: startRepo(false, nil)})
	l.gh.SetPermission(e2eRepo, "bob", "write")
	labelRun := func(i int) time.Duration { return labelToFirstRequest(l, i) }
	reviewRun := func(i int) time.Duration {
		branch := fmt.Sprintf("change-%d", i)
		l.gh.CreateBranch(e2eRepo, branch, "main")
		l.gh.CommitFile(e2eRepo, branch, fmt.Sprintf("notes-%d.md", i), "notes\n", "Notes")
		pr := l.gh.AddPullRequest(e2eRepo, "bob", fmt.Sprintf("Notes %d", i), branch, "main")
		l.model.Append(planTurns(1)...)
		t0 := time.Now()
		l.command(pr, "/review")
		waitReview(t, l, pr)
		return firstRequestAfter(l.model, t0).Sub(t0)
	}
	labelRun(0) // the repository's first run
	var labels, reviews []time.Duration
	for i := 1; i <= envInt("SANDBOX_REVIEWLOAD_ROUNDS", 3); i++ {
		logLoad(t)
		labels = append(labels, labelRun(i))
		logLoad(t)
		reviews = append(reviews, reviewRun(i))
		t.Logf("round %d: label → first model request %s; /review → first model request %s", i, labels[i-1].Round(time.Millisecond), reviews[i-1].Round(time.Millisecond))
	}
	logLoad(t)
	t.Logf("/review → first model request %s (mean of %v) beside label → first model request %s (mean of %v): x%.2f (goal ≤ 1.2)",
		mean(reviews).Round(time.Millisecond), roundAll(reviews), mean(labels).Round(time.Millisecond), roundAll(labels), float64(mean(reviews))/float64(mean(labels)))
}

// labelToFirstRequest labels a new issue and returns label → the plan
// run's first model request, once its plan is posted.
func labelToFirstRequest(l *loop, i int) time.Duration {
	n := l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Pad the output %d", i), "Use left-pad.")
	l.model.Append(planTurns(1)...)
	t0 := time.Now()
	l.label(n)
	l.waitComment(n, "## 📋 Plan", 10*time.Minute)
	return firstRequestAfter(l.model, t0).Sub(t0)
}
