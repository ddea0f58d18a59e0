package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// e2eRoutines are the routines of TestE2ERoutines' repository; broken's
// cron line is wrong (minute 61).
const e2eRoutines = `routines:
  - name: sweep
    schedule: "* * * * *"
    task: Sweep the TODO comments into greet.txt.
  - name: weekly-deps
    schedule: "0 6 * * 1"
    timezone: Europe/Berlin
    task: Update the dependencies.
  - name: red-main
    on: main_ci_failed
    task: The default branch's checks fail. Find why and fix it.
  - name: broken
    schedule: "61 * * * *"
    task: never runs
`

// fileClock is the time both replicas read as now (SANDBOX_CLOCK_FILE).
type fileClock struct {
	t    *testing.T
	path string
	now  time.Time
}

func (c *fileClock) set(now time.Time) {
	c.t.Helper()
	c.now = now
	if err := os.WriteFile(c.path+".tmp", []byte(now.Format(time.RFC3339Nano)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(c.path+".tmp", c.path); err != nil {
		c.t.Fatal(err)
	}
}

func (c *fileClock) advance(d time.Duration) { c.set(c.now.Add(d)) }

// stopBot stops a replica as its supervisor would.
func stopBot(t *testing.T, p *botProcess) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the bot did not stop")
	}
}

// waitRoutinesRead waits until a replica has read the routines.
func waitRoutinesRead(t *testing.T, gh *githubtest.Server, p *botProcess) {
	t.Helper()
	gh.WaitFor(30*time.Second, "the replica read the routines", func() bool { return strings.Contains(p.logs.String(), `"routines read"`) })
}

// routineIssues are the issues routine name opened, oldest first.
func (l *loop) routineIssues(name string) []githubtest.Issue {
	return l.gh.IssuesLabeled(e2eRepo, "routine:"+name)
}

// waitRoutineIssue waits until routine name has opened n issues and the
// n-th has its plan; it returns that issue.
func (l *loop) waitRoutineIssue(name string, n int) githubtest.Issue {
	l.t.Helper()
	l.gh.WaitFor(time.Minute, fmt.Sprintf("issue %d of routine %s", n, name), func() bool { return len(l.routineIssues(name)) >= n })
	iss := l.routineIssues(name)[n-1]
	l.waitComment(iss.Number, "## 📋 Plan", 3*time.Minute)
	return iss
}

// TestE2ERoutines: the real bot, two replicas on the docker backend and
// one clock (SANDBOX_CLOCK_FILE), the real image and OpenCode on the
// scripted model. A routine every minute opens one issue per tick in all,
// by the App, and its plan is posted for /approve; while it is open the
// next tick opens none and says so once; closed, the next tick opens one;
// both replicas stopped across two ticks, one catch-up issue at the
// start. The default branch's CI fails: one issue with the failing line
// and a plan, redelivered to both replicas and failing again on a later
// head: still one. /run weekly-deps delivered to both replicas starts it
// once. The bad cron line gets a failing check on its commit, and the
// other routines run.
func TestE2ERoutines(t *testing.T) {
	const routinePlan = "1. Look at greet.txt.\n2. Nothing else."
	var script []modeltest.Turn
	for range 5 {
		script = append(script, modeltest.Turn{Text: routinePlan, Usage: usage(900, 40)})
	}
	clock := &fileClock{t: t, path: filepath.Join(t.TempDir(), "now")}
	clock.set(time.Date(2026, 11, 29, 9, 0, 30, 0, time.UTC))
	l := startLoop(t, loopOptions{script: script, sandboxYML: e2eRoutines, files: map[string]string{"README.md": "# demo\n"},
		env: []string{"SANDBOX_CLOCK_FILE=" + clock.path}})
	replica := l.startReplica()
	waitRoutinesRead(t, l.gh, l.bot)
	waitRoutinesRead(t, l.gh, replica)

	// The bad cron line: one failing check run on the head, at its line
	// and column; the other routines are read.
	head := l.gh.BranchSHA(e2eRepo, "main")
	var bad []githubtest.CheckRun
	l.gh.WaitFor(30*time.Second, "the check run of the bad routine", func() bool {
		bad = slices.DeleteFunc(l.gh.CheckRuns(e2eRepo), func(c githubtest.CheckRun) bool { return c.Name != "sandbox-agent routines" })
		return len(bad) > 0
	})
	yml, _ := l.gh.FileAt(e2eRepo, head, ".sandbox.yml")
	line := strings.Count(yml[:strings.Index(yml, `"61 * * * *"`)], "\n") + 1
	if len(bad) != 1 || bad[0].HeadSHA != head || bad[0].Conclusion != "failure" || len(bad[0].Annotations) != 1 ||
		bad[0].Annotations[0].Line != line || bad[0].Annotations[0].Column != 15 || !strings.Contains(bad[0].Summary, fmt.Sprintf(".sandbox.yml:%d:15: routines[3].schedule", line)) {
		t.Fatalf("the bad routine's check runs: %+v; want one failing on %.7s at .sandbox.yml:%d:15", bad, head, line)
	}

	tickAt := time.Now()
	clock.advance(35 * time.Second) // 9:01:05
	first := l.waitRoutineIssue("sweep", 1)
	t.Logf("tick → issue with its plan: %s", time.Since(tickAt).Round(time.Millisecond))
	if first.User != githubtest.AppLogin || !slices.Contains(first.Labels, "agent") || !strings.Contains(first.Body, "tick 2026-11-29T09:01") {
		t.Errorf("the routine's issue: %+v", first)
	}
	clock.advance(time.Minute) // 9:02:05: #first is open
	l.waitComment(first.Number, "is still open", time.Minute)
	if n := len(l.routineIssues("sweep")); n != 1 {
		t.Fatalf("a tick while the issue is open opened another: %d issues", n)
	}
	l.gh.CloseIssue(e2eRepo, first.Number)
	clock.advance(time.Minute) // 9:03:05
	second := l.waitRoutineIssue("sweep", 2)
	if !strings.Contains(second.Body, "tick 2026-11-29T09:03") {
		t.Errorf("the second issue is not the 9:03 tick's:\n%s", second.Body)
	}

	// Both replicas stopped across two ticks: one catch-up issue.
	l.gh.CloseIssue(e2eRepo, second.Number)
	stopBot(t, l.bot)
	stopBot(t, replica)
	clock.advance(2 * time.Minute) // 9:05:05; 9:04 and 9:05 missed
	l.bot = l.startBot()
	replica = l.startReplica()
	third := l.waitRoutineIssue("sweep", 3)
	if !strings.Contains(third.Body, "tick 2026-11-29T09:05") {
		t.Errorf("the catch-up issue is not the latest missed tick's:\n%s", third.Body)
	}
	waitRoutinesRead(t, l.gh, replica)

	// The default branch's CI fails: one issue with the failing line, its
	// plan; redelivered to both replicas, and failing on a later head.
	_, suite := l.playChecks("main", head, false)
	for i, b := range []*botProcess{l.bot, replica, l.bot} {
		l.deliverTo(b, "check_suite", fmt.Sprintf("d-main-%d", i%2), suite)
	}
	red := l.waitRoutineIssue("red-main", 1)
	if !strings.Contains(red.Body, "greeting: want hello, got") || !strings.Contains(red.Body, "Run ./check-greeting.sh") {
		t.Errorf("the red-main issue lacks the failing line and step:\n%s", red.Body)
	}
	later := l.gh.CommitFile(e2eRepo, "main", "notes.txt", "notes\n", "Notes")
	_, suite = l.playChecks("main", later, false)
	l.deliverTo(replica, "check_suite", "d-main-later", suite)
	l.deliverTo(l.bot, "check_suite", "d-main-later", suite)

	// /run weekly-deps on an issue, delivered to both replicas: once.
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Chores", "")
	id := l.gh.AddComment(e2eRepo, n, e2eWriter, "/run weekly-deps")
	payload := l.gh.Payload("issue_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		m["issue"] = map[string]any{"number": n, "title": "Chores", "body": ""}
		m["comment"] = map[string]any{"id": id, "body": "/run weekly-deps", "user": map[string]any{"login": e2eWriter, "type": "User"}}
	})
	l.deliverTo(l.bot, "issue_comment", fmt.Sprintf("comment-%d", id), payload)
	l.deliverTo(replica, "issue_comment", fmt.Sprintf("comment-%d", id), payload)
	l.waitRoutineIssue("weekly-deps", 1)
	l.waitComment(n, "The routine `weekly-deps` started", time.Minute)

	if got := len(l.routineIssues("red-main")); got != 1 {
		t.Errorf("the same failure on a later head, redelivered: %d red-main issues; want 1", got)
	}
	if got := len(l.routineIssues("weekly-deps")); got != 1 {
		t.Errorf("/run delivered to both replicas: %d issues; want 1", got)
	}
	if got := len(l.routineIssues("sweep")); got != 3 {
		t.Errorf("sweep opened %d issues; want 3", got)
	}
	var started int
	for _, c := range l.gh.Issue(e2eRepo, n).Comments {
		if c.User == githubtest.AppLogin && strings.Contains(c.Body, "The routine `weekly-deps` started") {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d answers to one /run; want 1", started)
	}
}
