package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Issue 47, as a new user met it: SANDBOX_MAX_RUNS=1, the command
// harness with a plan that takes a few seconds, four issues labeled at
// once; the bot is stopped (SIGTERM) while the queue hands the slot to the
// second issue's run (the moment the first sandbox ends, when the bot
// frees its slot and starts the next; or the moment the first plan is
// posted, as the issue did it), and started again on the same data
// directory. Every issue gets its plan, once, in label order, and no two
// sandboxes ever run at once. The log says how long after the restart the
// queue moved again (before the fix: never, when the stop fell between
// the slot's hand-over and the next run's submission).
func TestE2EQueueSurvivesStopAtHandover(t *testing.T) {
	testenv.Long(t, "runs the bot and four sandboxes on the Docker engine")
	for _, at := range []string{"first sandbox ended", "first plan posted"} {
		t.Run(at, func(t *testing.T) { queueStopAtHandover(t, at) })
	}
}

func queueStopAtHandover(t *testing.T, at string) {
	l := startLoop(t, loopOptions{harness: "command", model: "none", env: []string{"SANDBOX_MAX_RUNS=1"},
		sandboxYML: "command: 'sleep 3; echo \"1. Write the greeting.\"'\n"})
	issues := make([]int, 4)
	for i := range issues {
		issues[i] = l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Task %d", i+1), "Plan it.")
	}
	most := watchRunning(t, l.dataDir)
	// One after another, each once the bot answered the one before (a
	// second in all): labels that reach the bot at the same moment are
	// handled by its workers in any order, and label order is the order
	// the bot heard them in.
	l.label(issues[0])
	l.waitComment(issues[0], `"kind":"ack"`, time.Minute)
	for _, n := range issues[1:] {
		l.label(n)
		l.waitComment(n, `"kind":"queued"`, time.Minute)
	}
	if at == "first plan posted" {
		l.waitComment(issues[0], `"kind":"plan"`, 2*time.Minute)
	} else {
		l.gh.WaitFor(2*time.Minute, "the first sandbox to end", func() bool {
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "status=exited", "--filter", "label=org.sandbox-bot.data-dir="+l.dataDir).Output()
			return len(strings.Fields(string(out))) > 0
		})
	}
	_ = l.bot.cmd.Process.Signal(syscall.SIGTERM)
	<-l.bot.done
	stoppedLog := l.bot.logs.String()
	before := botCommentIDs(l, issues[1:])
	restarted := time.Now()
	l.bot = l.startBot()
	var moved time.Duration
	l.gh.WaitFor(2*time.Minute, "the queue to move after the restart", func() bool {
		for _, c := range botComments(l, issues[1:]) {
			if !before[c.ID] && (strings.Contains(c.Body, `"kind":"ack"`) || strings.Contains(c.Body, `"kind":"plan"`)) {
				moved = c.CreatedAt.Sub(restarted)
				return true
			}
		}
		return false
	})
	t.Logf("the queue moved %s after the restart began (the bot's start included; load average %s); the stop cut a queued run's start: %v; the restarted bot resumed a claimed run: %v",
		moved.Round(time.Millisecond), testenv.LoadAverage(), strings.Contains(stoppedLog, "stopping while a queued run started"),
		strings.Contains(l.bot.logs.String(), "resuming queued runs"))
	for _, n := range issues[1:] {
		l.waitComment(n, `"kind":"plan"`, 3*time.Minute)
	}
	var order []int
	var firstPlan []int64
	for _, n := range issues {
		plans := 0
		for _, c := range l.gh.Issue(e2eRepo, n).Comments {
			if c.User == githubtest.AppLogin && strings.Contains(c.Body, `"kind":"plan"`) {
				plans++
				firstPlan = append(firstPlan, c.ID)
			}
		}
		if plans != 1 {
			t.Errorf("#%d has %d plans, want 1", n, plans)
		}
	}
	// Comment ids grow with time: the plans' ids in issue order are sorted
	// when the plans came in label order.
	if !slices.IsSorted(firstPlan) {
		for _, id := range slices.Sorted(slices.Values(firstPlan)) {
			order = append(order, issues[slices.Index(firstPlan, id)])
		}
		t.Errorf("plans posted in the order of %v, want the label order %v", order, issues)
	}
	if m := most(); m > 1 {
		t.Errorf("%d sandboxes ran at once under SANDBOX_MAX_RUNS=1", m)
	}
}

func botComments(l *loop, issues []int) []*githubtest.Comment {
	var out []*githubtest.Comment
	for _, n := range issues {
		for _, c := range l.gh.Issue(e2eRepo, n).Comments {
			if c.User == githubtest.AppLogin {
				out = append(out, c)
			}
		}
	}
	return out
}

func botCommentIDs(l *loop, issues []int) map[int64]bool {
	ids := map[int64]bool{}
	for _, c := range botComments(l, issues) {
		ids[c.ID] = true
	}
	return ids
}

// watchRunning counts, until the test ends, the sandboxes of dataDir the
// engine runs at once; the returned func gives the most seen.
func watchRunning(t *testing.T, dataDir string) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	most := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			out, err := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "status=running",
				"--filter", "label=org.sandbox-bot.data-dir="+dataDir).Output()
			if err == nil {
				mu.Lock()
				most = max(most, len(strings.Fields(string(out))))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}
