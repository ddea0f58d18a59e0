package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// The repository's own CI on the agent's pull request, through the real
// bot on the docker backend, the real image and OpenCode on the scripted
// model. The test plays CI: on each new head of the PR's branch it posts
// an Actions job "test" (greet.txt must say hello; its log ends with the
// failing line) and a commit status "lint", which fails on main too, and
// delivers their webhooks.

// ciLog is an Actions job's log: set-up noise, the failing check's output
// and error, the job's clean-up.
func ciLog(greeting string) string {
	var b strings.Builder
	stamp := "2026-11-27T10:00:00.0000000Z "
	b.WriteString(stamp + "##[group]Run actions/checkout@v4\n")
	for i := range 150 {
		fmt.Fprintf(&b, "%sremote: Counting objects: %d%% (%d/150), done.\n", stamp, i*100/150, i)
	}
	b.WriteString(stamp + "##[endgroup]\n" + stamp + "##[group]Run ./check-greeting.sh\n")
	if greeting == "hello" {
		b.WriteString(stamp + "greeting: ok\n")
	} else {
		fmt.Fprintf(&b, "%s\x1b[31mgreeting: want hello, got %s\x1b[0m\n%s##[error]Process completed with exit code 1.\n", stamp, greeting, stamp)
	}
	b.WriteString(stamp + "Post job cleanup.\n" + stamp + "Cleaning up orphan processes\n")
	return b.String()
}

// playCI posts the checks of head (the PR branch's) and returns the
// webhooks GitHub would send: the status's, then the Actions suite's.
func (l *loop) playCI(branch, head string) (status, suite []byte) {
	l.t.Helper()
	return l.playChecks(branch, head, true)
}

// playChecks posts the Actions job "test" on head, and the status "lint"
// when lint (nil for the status's webhook then).
func (l *loop) playChecks(branch, head string, lint bool) (status, suite []byte) {
	l.t.Helper()
	greeting, _ := l.gh.FileAt(e2eRepo, head, "greet.txt")
	greeting = strings.TrimSpace(greeting)
	conclusion := "failure"
	if greeting == "hello" {
		conclusion = "success"
	}
	if lint {
		l.gh.SetStatus(e2eRepo, head, "lint", "failure", "lint: 3 problems (also on main)")
		status = l.gh.StatusPayload(e2eRepo, head, branch, "lint")
	}
	id := l.gh.AddCheckRun(e2eRepo, githubtest.CheckRunSpec{Name: "test", HeadSHA: head, HeadBranch: branch, App: githubtest.ActionsApp,
		Conclusion: conclusion, Title: "greeting check", Workflow: "CI", Log: ciLog(greeting),
		Steps: []githubtest.Step{{Name: "Run actions/checkout@v4", Conclusion: "success"}, {Name: "Run ./check-greeting.sh", Conclusion: conclusion}}})
	return status, l.gh.CheckSuitePayload(e2eRepo, id)
}

// deliverTo delivers a webhook to one bot replica.
func (l *loop) deliverTo(b *botProcess, event, delivery string, body []byte) {
	l.t.Helper()
	if code := githubtest.Deliver(l.t, "http://"+b.addr+"/api/github/hook", event, delivery, body, githubtest.Sign(body, e2eSecret)); code != http.StatusOK {
		l.t.Fatalf("%s delivery answered %d", event, code)
	}
}

// TestE2ECIFix: a PR whose workflow fails gets one fix run, from the same
// webhook delivered three times and once to a second replica; the run's
// prompt holds the failing line of the job's log; its push turns the check
// green on the new head and the PR body records it; what fails on main too
// gets one comment and no run; after the last attempt (a writer's /revise
// broke it again) one comment and no run; a person's push, no run.
func TestE2ECIFix(t *testing.T) {
	l := startLoop(t, loopOptions{script: []modeltest.Turn{
		// execute (no plan step): the greeting is wrong
		{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hullo\n")}, Usage: usage(1000, 30)},
		{Text: "Added greet.txt.", Usage: usage(1100, 10)},
		// the CI fix run
		{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hello\n")}, Usage: usage(1200, 30)},
		{Text: "The check wanted hello; greet.txt said hullo. Fixed.", Usage: usage(1300, 10)},
		// a writer's /revise, which breaks it again
		{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hullo\n")}, Usage: usage(1400, 30)},
		{Text: "greet.txt says hullo, as asked.", Usage: usage(1500, 10)},
	}, sandboxYML: "plan: { required: false }\nci: { fix: true, fix_attempts: 1 }\n", files: map[string]string{"README.md": "# demo\n"},
		env: []string{"SANDBOX_REVIEW_BATCH_WINDOW=1s"}})
	replica := l.startBot()
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range l.gh.Issue(e2eRepo, 2).Comments {
				t.Logf("PR comment by %s:\n%s", c.User, c.Body)
			}
		}
	})
	l.gh.SetStatus(e2eRepo, l.gh.BranchSHA(e2eRepo, "main"), "lint", "failure", "lint: 3 problems")

	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	labelAt := time.Now()
	l.label(n)
	l.waitComment(n, "🚀 Opened", 5*time.Minute)
	pr := l.gh.PullRequests(e2eRepo)[0]
	branch, h1 := pr.PR.Head, l.gh.BranchSHA(e2eRepo, pr.PR.Head)
	firstExec := l.model.ScriptedRequests()[0].Time

	// H1 fails: one fix run, whatever the number of deliveries and replicas.
	status, suite := l.playCI(branch, h1)
	l.deliver("status", "d-status-1", status)
	ciAt := time.Now()
	for i := range 3 {
		l.deliver("check_suite", "d-suite-1", suite)
		if i == 0 {
			l.deliverTo(replica, "check_suite", "d-suite-1", suite)
		}
	}
	l.waitComment(pr.Number, "Fixing the failing checks `test`", time.Minute)
	done := l.waitComment(pr.Number, "a CI fix for `test`", 5*time.Minute)
	fixReq := l.model.ScriptedRequests()[2]
	prompt := fixReq.LastUser()
	for _, want := range []string{"greeting: want hello, got hullo\n##[error]Process completed with exit code 1.", "Run ./check-greeting.sh", "`lint`"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the fix run's prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "Counting objects: 0%") || strings.Contains(prompt, "Post job cleanup") {
		t.Errorf("the fix run's prompt holds the log's set-up or clean-up:\n%s", prompt)
	}
	if n := l.countBot(pr.Number, "Fixing the failing checks"); n != 1 {
		t.Errorf("%d fix runs started, want 1:\n%s", n, done)
	}

	// H2 (the fix run's push): the check is green; lint still fails, as
	// on main: one comment, no run.
	h2 := l.gh.BranchSHA(e2eRepo, branch)
	if h2 == h1 {
		t.Fatal("the fix run pushed nothing")
	}
	status, suite = l.playCI(branch, h2)
	if c := l.gh.CheckRuns(e2eRepo); !green(c, h2, "test") {
		t.Errorf("the check is not green on the fix run's head %s", h2)
	}
	l.deliver("status", "d-status-2", status)
	l.deliver("check_suite", "d-suite-2", suite)
	l.waitComment(pr.Number, "on the head of `main` too", time.Minute)
	l.gh.WaitFor(time.Minute, "the PR body's history of the CI fix", func() bool {
		return strings.Contains(l.gh.Issue(e2eRepo, pr.Number).Body, "| revise (CI fix: test) |")
	})

	// A writer's /revise breaks it on H3, the App's: the fix runs are used
	// up, so one comment and no run.
	l.command(pr.Number, "/revise make greet.txt say hullo")
	l.waitComment(pr.Number, "(revise) finished", 5*time.Minute)
	l.gh.WaitFor(time.Minute, "the revise run's head in the PR body", func() bool {
		return strings.Contains(l.gh.Issue(e2eRepo, pr.Number).Body, l.gh.BranchSHA(e2eRepo, branch))
	})
	status, suite = l.playCI(branch, l.gh.BranchSHA(e2eRepo, branch))
	l.deliver("status", "d-status-3", status)
	l.deliver("check_suite", "d-suite-3", suite)
	gaveUp := l.waitComment(pr.Number, "still fail", time.Minute)
	if !strings.Contains(gaveUp, "a fix for `test`") {
		t.Errorf("the give-up comment:\n%s", gaveUp)
	}

	// A person's push: nothing.
	before := strings.Count(l.bot.logs.String(), `"do":"nothing"`)
	h4 := l.gh.CommitFile(e2eRepo, branch, "greet.txt", "hi\n", "A person's try")
	status, suite = l.playCI(branch, h4)
	l.deliver("status", "d-status-4", status)
	l.deliver("check_suite", "d-suite-4", suite)
	l.gh.WaitFor(time.Minute, "the bot's decision on a person's push", func() bool {
		return strings.Count(l.bot.logs.String(), `"do":"nothing"`) > before
	})
	if n := l.countBot(pr.Number, "Fixing the failing checks"); n != 1 {
		t.Errorf("%d fix runs in all, want 1", n)
	}
	for _, c := range []string{"on the head of `main` too", "still fail"} {
		if n := l.countBot(pr.Number, c); n != 1 {
			t.Errorf("%d comments with %q, want 1", n, c)
		}
	}

	// The measure: last check's webhook → the fix run's first model
	// request, beside label → the execute run's first model request.
	ciStart, labelStart := fixReq.Time.Sub(ciAt), firstExec.Sub(labelAt)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("checks failed → fix run's first model request %s; label → first model request %s; ratio %.2f (goal ≤ 1.2); load average %s",
		ciStart.Round(time.Millisecond), labelStart.Round(time.Millisecond), ciStart.Seconds()/labelStart.Seconds(), strings.TrimSpace(string(load)))
	logCheckBytes(t, l.bot.logs.String()+replica.logs.String())
	logStages(t, l.bot.logs.String())
}

// green reports whether the check name on head succeeded.
func green(runs []githubtest.CheckRun, head, name string) bool {
	for _, c := range runs {
		if c.HeadSHA == head && c.Name == name {
			return c.Conclusion == "success"
		}
	}
	return false
}

// countBot counts the bot's comments on #n containing s.
func (l *loop) countBot(n int, s string) int {
	k := 0
	for _, c := range l.gh.Issue(e2eRepo, n).Comments {
		if c.User == githubtest.AppLogin && strings.Contains(c.Body, s) {
			k++
		}
	}
	return k
}

// logCheckBytes prints, per failing check a fix run was given, the bytes
// of log it got beside the log's size (the bot logs both).
func logCheckBytes(t *testing.T, logs string) {
	for _, line := range strings.Split(logs, "\n") {
		var e struct {
			Message  string `json:"message"`
			Check    string `json:"check"`
			Tail     int    `json:"log_tail_bytes"`
			LogBytes int64  `json:"log_bytes"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Message == "failing check for the fix run" && e.LogBytes > 0 {
			t.Logf("check %q: %d bytes of log given, of a log of %d bytes (%.1f%%)", e.Check, e.Tail, e.LogBytes, 100*float64(e.Tail)/float64(max(e.LogBytes, 1)))
		}
	}
}
