package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// Runs that do not go straight through, in the real image on the Docker
// backend with OpenCode: a sandbox stopped under its agent pushes what
// was done and the bot continues it; a check that fails goes to repair;
// a task run's files land on a branch of their own.

// TestE2EInterruptedExecuteContinues: the execute sandbox is stopped (as
// a drained node stops it) while its agent waits on the model. The runner
// pushes the work so far and leaves an interrupted receipt; the bot starts
// a continue run on the branch, whose first result fails the check; one
// repair fixes it and the PR opens with both runs in its history.
func TestE2EInterruptedExecuteContinues(t *testing.T) {
	l := startLoop(t, loopOptions{script: []modeltest.Turn{
		{Text: "1. Write WIP.txt. 2. Write NOTES.txt saying ok.", Usage: usage(800, 40)},
		// execute: one edit, then the model hangs
		{ToolCalls: []modeltest.ToolCall{write("WIP.txt", "work in progress\n")}, Usage: usage(1000, 30)},
		{Stall: true},
		// continue: a first try that fails the check, then the repair
		{ToolCalls: []modeltest.ToolCall{write("NOTES.txt", "draft\n")}, Usage: usage(1200, 30)},
		{Text: "Wrote NOTES.txt.", Usage: usage(1300, 10)},
		{ToolCalls: []modeltest.ToolCall{write("NOTES.txt", "ok\n")}, Usage: usage(1400, 30)},
		{Text: "NOTES.txt now says ok.", Usage: usage(1500, 10)},
	}, sandboxYML: "validate:\n  notes: grep -qx ok NOTES.txt\n", files: map[string]string{"README.md": "# demo\n"}})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Notes", "Write the notes.")
	l.label(n)
	l.waitComment(n, "## 📋 Plan", 5*time.Minute)
	l.command(n, "/approve")
	if err := l.model.WaitServed(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	container := l.sandbox("execute")
	if out, err := exec.Command("docker", "stop", "-t", "60", container).CombinedOutput(); err != nil {
		t.Fatalf("docker stop %s: %v: %s", container, err, out)
	}
	l.waitComment(n, "🚀 Opened", 8*time.Minute)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want 1 PR, got %d", len(prs))
	}
	pr := prs[0]
	for file, want := range map[string]string{"WIP.txt": "work in progress\n", "NOTES.txt": "ok\n"} {
		if got, ok := l.gh.FileAt(e2eRepo, pr.PR.Head, file); !ok || got != want {
			t.Errorf("%s on %s = %q (exists %v), want %q", file, pr.PR.Head, got, ok, want)
		}
	}
	if l.submitted("continue") != 1 {
		t.Errorf("continue runs: %d, want 1", l.submitted("continue"))
	}
	for _, want := range []string{"| `notes` | ✅ passed | 2 |", "attempt 1 fixed ✅", "(continue, attempt 2)", "| continue | completed |"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the PR body lacks %q:\n%s", want, pr.Body)
		}
	}
}

// TestE2ETaskRunArtifacts: a repository in task mode; the agent's files
// come out of the sandbox (which holds a read-only token) and the bot
// commits them to an artifacts branch of their own.
func TestE2ETaskRunArtifacts(t *testing.T) {
	l := startLoop(t, loopOptions{script: []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{write("report.md", "# Report\n\nAll good.\n")}, Usage: usage(600, 30)},
		{Text: "Wrote report.md.", Usage: usage(700, 10)},
	}, sandboxYML: "mode: task\n", files: map[string]string{"README.md": "# demo\n"}, operatorOpenCode: true})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Report", "Write a report.")
	l.label(n)
	done := l.waitComment(n, "report.md", 5*time.Minute)
	refs := l.gh.RefsWithPrefix(e2eRepo, "refs/heads/agent-artifacts/")
	if len(refs) != 1 {
		t.Fatalf("artifact branches %v, want 1:\n%s", refs, done)
	}
	files := l.gh.TreeFiles(e2eRepo, l.gh.Ref(e2eRepo, refs[0]))
	if files["artifacts/report.md"] != "# Report\n\nAll good.\n" || len(files) != 1 {
		t.Fatalf("the artifacts branch holds %v", files)
	}
	if reqs := l.model.ScriptedRequests(); len(reqs) == 0 || reqs[0].Authorization != "Bearer modeltest-key" {
		t.Errorf("the provider key did not reach the model through the gateway: %+v", reqs)
	}
	for _, tok := range l.gh.Tokens() {
		if len(tok.Repositories) > 0 && tok.Permissions["contents"] != "read" {
			t.Errorf("a task run's sandbox got contents:%s", tok.Permissions["contents"])
		}
	}
	if len(l.gh.PullRequests(e2eRepo)) != 0 {
		t.Error("a task run opened a PR")
	}
}

// sandbox is the name of the loop's one sandbox container of mode.
func (l *loop) sandbox(mode string) string {
	l.t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=org.sandbox-bot.data-dir="+l.dataDir,
		"--filter", "label=org.sandbox-bot.mode="+mode).Output()
	ids := strings.Fields(string(out))
	if err != nil || len(ids) != 1 {
		l.t.Fatalf("want one running %s sandbox of this test, found %q (%v)", mode, ids, err)
	}
	return ids[0]
}
