package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// attemptsAgent is the command harness's agent of the attempts tests: it
// plans in plan mode, and in an execute run does what its attempt number
// (SANDBOX_ATTEMPT) says. Attempt 1 breaks the check, attempt 2 passes
// with a large change, attempt 3 passes with a small one, but only when
// its prompt tells it that it is attempt 3 of 3.
const attemptsAgent = `command: |
  prompt=$(cat)
  if [ -n "$SANDBOX_READ_ONLY" ]; then echo "1. Write greet.txt saying hello."; exit 0; fi
  case "$SANDBOX_ATTEMPT" in
    1) echo bye > greet.txt ;;
    2) sleep 5; echo hello > greet.txt; seq 1 60 > notes.txt ;;
    *) case "$prompt" in *"This is attempt $SANDBOX_ATTEMPT of $SANDBOX_ATTEMPTS"*) echo hello > greet.txt ;; *) echo "no attempt line" > greet.txt ;; esac ;;
  esac
  echo "Attempt $SANDBOX_ATTEMPT of $SANDBOX_ATTEMPTS wrote greet.txt."
validate:
  greeting: grep -q hello greet.txt
repair:
  attempts: 0
`

// TestE2EApproveAttempts: /approve --attempts 3 through the bot on
// Docker, the real image, one slot (SANDBOX_MAX_RUNS=1): the attempts
// wait in the queue and start as the slot frees, never two sandboxes at
// once; once all three have ended, one PR carries attempt 3 (passed, the
// smaller change), its receipt lists all three with their checks and
// sizes; /pick 2 moves the PR's branch to attempt 2's commit and the
// receipt says so. "restarted": the bot is stopped once the first attempt
// has ended and started again; the approval still ends in one PR.
func TestE2EApproveAttempts(t *testing.T) {
	testenv.Long(t, "runs the bot and four sandboxes on the Docker engine")
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "queued", true: "restarted"}[restart], func(t *testing.T) { approveAttempts(t, restart) })
	}
}

func approveAttempts(t *testing.T, restart bool) {
	l := startLoop(t, loopOptions{harness: "command", model: "none", env: []string{"SANDBOX_MAX_RUNS=1"}, sandboxYML: attemptsAgent})
	most := watchRunning(t, l.dataDir)
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	start := time.Now()
	l.command(n, "/approve --attempts 3")
	l.waitComment(n, "Started **3 attempts**", time.Minute)
	l.waitComment(n, `"kind":"queued"`, time.Minute)
	if restart {
		l.gh.WaitFor(3*time.Minute, "the first attempt's check run to complete", func() bool {
			for _, c := range l.gh.CheckRuns(e2eRepo) {
				if c.Status == "completed" && strings.HasPrefix(c.Title, "Attempt 1 of 3") {
					return true
				}
			}
			return false
		})
		_ = l.bot.cmd.Process.Signal(syscall.SIGTERM)
		<-l.bot.done
		ended := 0
		for _, c := range l.gh.CheckRuns(e2eRepo) {
			if c.Status == "completed" && strings.HasPrefix(c.Title, "Attempt ") {
				ended++
			}
		}
		t.Logf("the bot stopped with %d of 3 attempts ended", ended)
		l.bot = l.startBot()
	}
	l.waitComment(n, "🚀 Opened", 6*time.Minute)
	t.Logf("/approve --attempts 3 → PR in %s (one slot; load average %s)", time.Since(start).Round(time.Second), testenv.LoadAverage())
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want one PR, got %d", len(prs))
	}
	pr := prs[0]
	set := setOf(t, l, n)
	heads := map[int]string{}
	for k := 1; k <= 3; k++ {
		heads[k] = l.gh.BranchSHA(e2eRepo, fmt.Sprintf("agent/%s-a%d", strings.ToLower(set), k))
		if heads[k] == "" {
			t.Fatalf("attempt %d left no branch", k)
		}
	}
	if got := l.gh.BranchSHA(e2eRepo, pr.PR.Head); got != heads[3] {
		t.Errorf("the PR's branch %s is at %s, want attempt 3's %s", pr.PR.Head, got, heads[3])
	}
	if got, _ := l.gh.FileAt(e2eRepo, pr.PR.Head, "greet.txt"); got != "hello\n" {
		t.Errorf("the PR's greet.txt is %q", got)
	}
	for _, want := range []string{"This branch carries **attempt 3**, the best by the checks", "| 1 | 3 | failed greeting | ❌ `greeting`",
		"| 2 | 2 | passed | ✅ `greeting`", "| 3 ⬅ | 1 | passed | ✅ `greeting`", "+61 −0", "+1 −0", "The rule: validation passed"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the receipt lacks %q:\n%s", want, pr.Body)
		}
	}
	if m := most(); m > 1 {
		t.Errorf("%d sandboxes ran at once under SANDBOX_MAX_RUNS=1", m)
	}
	if got := countBot(l, n, `"kind":"result"`); got != 1 {
		t.Errorf("%d result comments on the issue, want 1", got)
	}

	l.command(pr.Number, "/pick 2")
	l.waitComment(pr.Number, "to attempt 2's commit", time.Minute)
	if got := l.gh.BranchSHA(e2eRepo, pr.PR.Head); got != heads[2] {
		t.Errorf("after /pick 2 the PR's branch is at %s, want attempt 2's %s", got, heads[2])
	}
	if body := l.gh.Issue(e2eRepo, pr.Number).Body; !strings.Contains(body, "This branch carries **attempt 2**, picked by @"+e2eWriter) {
		t.Errorf("the receipt does not say attempt 2 was picked:\n%s", body)
	}

	// Merged: the attempts' own branches are deleted.
	repo := l.gh.Repo(e2eRepo)
	side := map[string]any{"id": repo.ID, "full_name": e2eRepo, "fork": false}
	l.deliver("pull_request", fmt.Sprintf("merged-%d", pr.Number), l.gh.Payload("pull_request.closed", e2eRepo, e2eWriter, func(m map[string]any) {
		m["pull_request"] = map[string]any{"number": pr.Number, "merged": true, "state": "closed", "body": l.gh.Issue(e2eRepo, pr.Number).Body,
			"user": map[string]any{"login": githubtest.AppLogin, "type": "Bot"},
			"head": map[string]any{"ref": pr.PR.Head, "repo": side}, "base": map[string]any{"ref": "main", "repo": side}}
	}))
	l.gh.WaitFor(time.Minute, "the attempts' branches deleted once the PR is merged", func() bool {
		for k := 1; k <= 3; k++ {
			if l.gh.BranchSHA(e2eRepo, fmt.Sprintf("agent/%s-a%d", strings.ToLower(set), k)) != "" {
				return false
			}
		}
		return true
	})
}

// setOf is the approval's task id, from its acknowledgement's marker.
func setOf(t *testing.T, l *loop, n int) string {
	t.Helper()
	c := l.waitComment(n, `"set":"`, time.Second)
	i := strings.Index(c, `"set":"`) + len(`"set":"`)
	return c[i : i+strings.Index(c[i:], `"`)]
}

// countBot counts the bot's comments on #n holding substr.
func countBot(l *loop, n int, substr string) int {
	count := 0
	for _, c := range l.gh.Issue(e2eRepo, n).Comments {
		if c.User == githubtest.AppLogin && strings.Contains(c.Body, substr) {
			count++
		}
	}
	return count
}

// TestE2EApproveAttemptsOpenCode: /approve --attempts 2 with the real
// OpenCode on the scripted model, one slot (the turns are served in the
// attempts' order): each attempt resumes the plan's session and is told
// its number; attempt 1 breaks the check, attempt 2 passes, and the PR
// carries attempt 2 with the table of both.
func TestE2EApproveAttemptsOpenCode(t *testing.T) {
	testenv.Long(t, "runs the bot and three sandboxes with OpenCode on the Docker engine")
	l := startLoop(t, loopOptions{env: []string{"SANDBOX_MAX_RUNS=1"}, files: map[string]string{"README.md": "# demo\n"},
		sandboxYML: "validate:\n  greeting: grep -q hello greet.txt\nrepair:\n  attempts: 0\n",
		script: []modeltest.Turn{
			{Text: plan, Usage: usage(1000, 60)},
			{ToolCalls: []modeltest.ToolCall{write("greet.txt", "bye\n")}, Usage: usage(1500, 40)},
			{Text: "Wrote greet.txt.", Usage: usage(1600, 20)},
			{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hello\n")}, Usage: usage(1500, 40)},
			{Text: "Wrote greet.txt saying hello.", Usage: usage(1600, 20)},
		}})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	l.command(n, "/approve --attempts 2")
	l.waitComment(n, "🚀 Opened", 8*time.Minute)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want one PR, got %d", len(prs))
	}
	pr := prs[0]
	if got, _ := l.gh.FileAt(e2eRepo, pr.PR.Head, "greet.txt"); got != "hello\n" {
		t.Errorf("the PR's greet.txt is %q, want attempt 2's", got)
	}
	for _, want := range []string{"This branch carries **attempt 2**", "| 1 | 2 | failed greeting", "| 2 ⬅ | 1 | passed", "Agent session | resumed from the plan run"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the receipt lacks %q:\n%s", want, pr.Body)
		}
	}
	told := map[int]bool{}
	for _, r := range l.model.Requests() {
		for _, m := range r.Messages {
			for k := 1; k <= 2; k++ {
				if m.Role == "user" && strings.Contains(m.Content, fmt.Sprintf("This is attempt %d of 2", k)) {
					told[k] = true
				}
			}
		}
	}
	if !told[1] || !told[2] {
		t.Errorf("the attempts told their number: %v", told)
	}
}
