package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// Fake credentials shaped like real ones (no real key is ever in a test).
const (
	e2eAWSKey = "AKIAZ7XQ3MRT5LW2KVNB"
	e2eToken  = "9f8Kq2LmX7vB4nR1tY6wZ3pJ0sD5hG8c"
	// e2eDeployKey is the one the revise run keeps through its repair.
	e2eDeployKey = "AKIAQ4WJ7TRZ2XNE5PLM"
	// e2eBlobKey sits in a file with NUL bytes (binary to git), and
	// e2eNameKey in a file's name: the scan once read neither.
	e2eBlobKey = "AKIAR5T2W7Q3E4Y6U2I7"
	e2eNameKey = "AKIAM3N5B7V2C4X6Z2L3"
)

// bash is OpenCode's shell tool.
func bash(command string) modeltest.ToolCall {
	return modeltest.ToolCall{Name: "bash", Args: map[string]any{"command": command, "description": "Edit files"}}
}

func lockWith(leftPad string) string {
	return `{"name":"demo","lockfileVersion":3,"requires":true,"packages":{"":{"name":"demo"},"node_modules/left-pad":{"version":"` + leftPad + `"}}}` + "\n"
}

// checksScript is the model's side: a plan naming its files, an execute
// pass that commits an AWS key and a high-entropy token, adds a Go module
// and an npm package at a version the OSV fixture names, and touches a
// file outside the plan (with its reason); the repair that removes the
// secrets and moves to the fixed version; the reviewer's pass.
func checksScript() []modeltest.Turn {
	return []modeltest.Turn{
		// plan run
		{Text: "Greet people.\n\n## Files\n- `greet.txt` — the greeting\n- `go.mod` — the uuid module\n- `package-lock.json` — left-pad", Usage: usage(1000, 60)},
		// execute run
		{ToolCalls: []modeltest.ToolCall{
			write("greet.txt", "hello\n"),
			write("config.go", "package main\n\nconst awsKey = \""+e2eAWSKey+"\"\n\nvar SESSION_TOKEN = \""+e2eToken+"\"\n"),
			write("go.mod", "module example.com/demo\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n"),
			write("package-lock.json", lockWith("1.3.0")),
			write("Makefile", "greet:\n\tcat greet.txt\n"),
			bash(`mkdir -p assets keys && printf 'PK\003\004\000\000\001\002aws_key=` + e2eBlobKey + `\000\377' > assets/blob.dat && echo placeholder > keys/` + e2eNameKey + `.txt`),
		}, Usage: usage(1500, 40)},
		{Text: "Added greet.txt.\n\n## Outside the approved plan\n- `Makefile` — a target that prints the greeting", Usage: usage(1700, 20)},
		// repair 1: the secret scan and the advisory
		{ToolCalls: []modeltest.ToolCall{
			write("config.go", "package main\n\nimport \"os\"\n\nvar awsKey = os.Getenv(\"AWS_ACCESS_KEY_ID\")\n"),
			write("package-lock.json", lockWith("1.3.1")),
			bash("rm -rf assets keys"),
		}, Usage: usage(1800, 30)},
		{Text: "Read the key from the environment; left-pad 1.3.1.", Usage: usage(1900, 10)},
		// the reviewer's pass
		{Text: "**Risks**\n- config.go reads AWS_ACCESS_KEY_ID unchecked\n\n**Missing tests**\n- none\n\n**Deviations**\n- config.go is not in the plan", Usage: usage(2500, 50)},
		// a revise run on the PR that commits a key and keeps it through
		// its one repair
		{ToolCalls: []modeltest.ToolCall{write("deploy.go", "package main\n\nconst deployKey = \""+e2eDeployKey+"\"\n")}, Usage: usage(2600, 30)},
		{Text: "Added the deploy key.", Usage: usage(2700, 10)},
		{ToolCalls: []modeltest.ToolCall{write("deploy.go", "package main\n\n// the deploy key\nconst deployKey = \""+e2eDeployKey+"\"\n")}, Usage: usage(2800, 30)},
		{Text: "The key is needed as it is.", Usage: usage(2900, 10)},
	}
}

// The checks before the PR through the whole loop: the real bot, the fake
// GitHub, the real sandbox image on the Docker backend (runner and agent
// as different users), OpenCode on the scripted model, an OSV fixture the
// operator mounts. The PR body shows the four parts; the branch's history
// never held the secrets; the reviewer's pass got no token of its own.
func TestE2EChecksBeforeThePR(t *testing.T) {
	osv := osvFixture(t)
	l := startLoop(t, loopOptions{script: checksScript(), env: []string{"SANDBOX_OSV_DIR=" + osv, "SANDBOX_REVIEW_BATCH_WINDOW=1s"},
		sandboxYML: "validate:\n  greeting: grep -q hello greet.txt\nreview:\n  enabled: true\nrepair:\n  attempts: 1\n",
		files: map[string]string{"README.md": "# demo\n", "go.mod": "module example.com/demo\n\ngo 1.22\n",
			"package-lock.json": `{"name":"demo","lockfileVersion":3,"requires":true,"packages":{"":{"name":"demo"}}}` + "\n"}})
	n, planComment, pr := greetPR(t, l)
	if !strings.Contains(planComment, `"files":[{"path":"greet.txt","note":"the greeting"}`) {
		t.Errorf("the plan comment's marker lacks the plan's files:\n%s", planComment)
	}
	body := pr.Body
	for _, want := range []string{
		"### Against the approved plan", "| `greet.txt` — the greeting | `greet.txt` |",
		"#### Outside the approved plan", "- `Makefile` — a target that prints the greeting", "- `config.go` — *no reason given*",
		"### Dependencies", "| added | `github.com/google/uuid` (Go) | v1.6.0 | `go.mod` |", "| added | `left-pad` (npm) | 1.3.1 | `package-lock.json` |",
		"Advisories (OSV, 1 advisories): none known for the versions added.",
		"### Secret scan", "finding(s) removed by the repair loop before any push, the held commits rewritten into one; nothing blocking.",
		"| `sandbox/secrets` | ✅ passed | 2 |", "| `sandbox/advisories` | ✅ passed | 2 |",
		"### Reviewer's pass", "config.go reads AWS_ACCESS_KEY_ID unchecked",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("PR body lacks %q", want)
		}
	}
	// The receipt's cost counts the reviewer's pass at the scripted prices.
	reviewCost := (2500*modeltest.InputPricePerM + 50*modeltest.OutputPricePerM) / 1e6
	if want := fmt.Sprintf("(reviewer's pass $%.2f)", reviewCost); !strings.Contains(body, want) {
		t.Errorf("PR body lacks %q", want)
	}
	// Nothing of the secrets reached GitHub: not the branch's history,
	// not a comment, not the PR body.
	log, err := exec.Command("git", "--git-dir", l.gh.Repo(e2eRepo).GitDir, "log", "-p", "main.."+pr.PR.Head).CombinedOutput()
	if err != nil {
		t.Fatalf("git log: %v\n%s", err, log)
	}
	for _, v := range []string{e2eAWSKey, e2eToken, e2eBlobKey, e2eNameKey} {
		if strings.Contains(string(log), v) || strings.Contains(body, v) {
			t.Fatalf("%s reached GitHub", v)
		}
		for _, c := range l.gh.Issue(e2eRepo, n).Comments {
			if strings.Contains(c.Body, v) {
				t.Fatalf("%s reached a comment", v)
			}
		}
	}
	repairNamesTheBlindSpots(t, l)
	wantSandboxTokens(t, l)
	if t.Failed() {
		t.Logf("PR body:\n%s", body)
	}
	reviseRefusesTheSecret(t, l, pr.Number)
}

// reviseRefusesTheSecret: a revise run on the PR whose agent commits an
// AWS key and keeps it through its repair. Nothing of it is pushed; the
// failure comment names the rule and the place, never the value; the PR
// body keeps the last completed run's checks; the revise prompt had the
// approved plan's files, read from the issue's plan comment.
func reviseRefusesTheSecret(t *testing.T, l *loop, pr int) {
	head := l.gh.BranchSHA(e2eRepo, l.gh.Issue(e2eRepo, pr).PR.Head)
	l.prCommand(pr, "/revise Add the deploy key.")
	failure := l.waitComment(pr, "did not finish", 4*time.Minute)
	for _, want := range []string{"aws-access-token at deploy.go:4", "| `sandbox/secrets` | ❌ | 2 |"} {
		if !strings.Contains(failure, want) {
			t.Errorf("the failure comment lacks %q:\n%s", want, failure)
		}
	}
	if got := l.gh.BranchSHA(e2eRepo, l.gh.Issue(e2eRepo, pr).PR.Head); got != head {
		t.Errorf("the branch moved from %s to %s: a held push reached GitHub", head, got)
	}
	refs, err := exec.Command("git", "--git-dir", l.gh.Repo(e2eRepo).GitDir, "log", "-p", "--all").CombinedOutput()
	if err != nil {
		t.Fatalf("git log: %v\n%s", err, refs)
	}
	if strings.Contains(string(refs), e2eDeployKey) || strings.Contains(failure, e2eDeployKey) {
		t.Fatalf("the revise run's key reached GitHub")
	}
	if got := l.gh.Issue(e2eRepo, pr).Body; !strings.Contains(got, "config.go reads AWS_ACCESS_KEY_ID unchecked") {
		t.Errorf("the failed revise run replaced the PR body's checks:\n%s", got)
	}
	var prompt string
	for _, r := range l.model.ScriptedRequests() {
		if strings.Contains(r.LastUser(), "Add the deploy key.") {
			prompt = r.LastUser()
			break
		}
	}
	if !strings.Contains(prompt, "# Files of the approved plan") || !strings.Contains(prompt, "- `greet.txt` — the greeting") {
		t.Errorf("the revise prompt lacks the approved plan's files:\n%s", prompt)
	}
}

// repairNamesTheBlindSpots: the repair prompt named the key in the file
// with NUL bytes and the one in a file's name (masked), and held neither.
func repairNamesTheBlindSpots(t *testing.T, l *loop) {
	t.Helper()
	var prompt string
	for _, r := range l.model.ScriptedRequests() {
		if strings.Contains(r.LastUser(), "The secret scan (") {
			prompt = r.LastUser()
			break
		}
	}
	for _, want := range []string{"at assets/blob.dat (text in a binary file)", "at keys/[REDACTED].txt (in the file's name)"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the repair prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, e2eBlobKey) || strings.Contains(prompt, e2eNameKey) {
		t.Errorf("the repair prompt holds a key:\n%s", prompt)
	}
}

// osvFixture is an OSV database of one advisory for left-pad before 1.3.1,
// readable by the sandbox's runner.
func osvFixture(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "osv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	adv := `{"id":"GHSA-e2e0-left-pad","summary":"left-pad pads wrong","affected":[{"package":{"ecosystem":"npm","name":"left-pad"},` +
		`"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.3.1"}]}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "GHSA-e2e0-left-pad.json"), []byte(adv), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// prCommand is a writer's comment on pull request pr, delivered as GitHub
// does: an issue_comment whose issue is a pull request.
func (l *loop) prCommand(pr int, body string) {
	id := l.gh.AddComment(e2eRepo, pr, e2eWriter, body)
	l.deliver("issue_comment", fmt.Sprintf("comment-%d", id), l.gh.Payload("issue_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		m["issue"] = map[string]any{"number": pr, "title": l.gh.Issue(e2eRepo, pr).Title,
			"pull_request": map[string]any{"url": fmt.Sprintf("https://api.github.com/repos/%s/pulls/%d", e2eRepo, pr)}}
		m["comment"] = map[string]any{"id": id, "body": body, "user": map[string]any{"login": e2eWriter, "type": "User"}}
	}))
}

// TestE2EChecksStrictPlanClaudeCode: plan.strict and the reviewer's pass
// through the whole loop with Claude Code (its provider served through the
// sandbox's model gateway): a file outside the approved plan fails
// validation, the repair undoes it, and the reviewer's pass, offered no
// tool that writes, is in the PR body with its cost.
func TestE2EChecksStrictPlanClaudeCode(t *testing.T) {
	bash := func(cmd string) modeltest.AnthropicTurn {
		return modeltest.AnthropicTurn{ToolUses: []modeltest.AnthropicToolUse{{Name: "Bash", Input: map[string]any{"command": cmd, "description": "Edit files"}}},
			Usage: modeltest.AnthropicUsage{InputTokens: 400, OutputTokens: 20}}
	}
	script := modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Text: "Greet people.\n\n## Files\n- `greet.txt` — the greeting", Usage: modeltest.AnthropicUsage{InputTokens: 900, OutputTokens: 60}},
		bash("echo hello > greet.txt && echo notes > NOTES.md"),
		{Text: "Added greet.txt, and NOTES.md.", Usage: modeltest.AnthropicUsage{InputTokens: 1000, OutputTokens: 20}},
		// the repair of sandbox/plan-scope
		bash("rm NOTES.md"),
		{Text: "Removed NOTES.md: it is not in the plan.", Usage: modeltest.AnthropicUsage{InputTokens: 1100, OutputTokens: 20}},
		// the reviewer's pass
		{Text: "**Risks**\n- none\n\n**Missing tests**\n- nothing checks greet.txt's wording\n\n**Deviations**\n- none", Usage: modeltest.AnthropicUsage{InputTokens: 3000, OutputTokens: 100}},
	}}
	l := startLoop(t, loopOptions{anthropic: &script, harness: "claude-code", model: modeltest.AnthropicModelID,
		sandboxYML: "validate:\n  greeting: grep -q hello greet.txt\nplan:\n  strict: true\nreview:\n  enabled: true\n",
		files:      map[string]string{"README.md": "# demo\n"}})
	_, _, pr := greetPR(t, l)
	// Claude Code prices the scripted Sonnet 4.5 at $3/M input, $15/M output.
	reviewCost := (3000*3.0 + 100*15.0) / 1e6
	for _, want := range []string{
		"| `sandbox/plan-scope` | ✅ passed | 2 |", "| `greet.txt` — the greeting | `greet.txt` |",
		"### Reviewer's pass", "nothing checks greet.txt's wording", fmt.Sprintf("(reviewer's pass $%.2f)", reviewCost),
	} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("PR body lacks %q", want)
		}
	}
	if strings.Contains(pr.Body, "Outside the approved plan") {
		t.Errorf("the repaired change still has files outside the plan")
	}
	if _, ok := l.gh.FileAt(e2eRepo, pr.PR.Head, "NOTES.md"); ok {
		t.Errorf("NOTES.md, outside the plan, is on %s", pr.PR.Head)
	}
	reqs := l.anthropic.ScriptedRequests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.UserText(), "You are reviewing a change") {
		t.Errorf("the last model request is not the reviewer's: %.300q", last.UserText())
	}
	for _, tool := range last.Tools {
		if tool == "Write" || tool == "Edit" {
			t.Errorf("the reviewer was offered the %s tool", tool)
		}
	}
	wantSandboxTokens(t, l)
	if t.Failed() {
		t.Logf("PR body:\n%s", pr.Body)
	}
	logAnthropicRequests(t, l.anthropic)
}

// logAnthropicRequests logs each model request in a line (turn, retry,
// side request, session), so a script that went off its rails shows where.
func logAnthropicRequests(t *testing.T, srv *modeltest.AnthropicServer) {
	for _, r := range srv.Requests() {
		t.Logf("model request at %s: turn %d (retry %v, side request %v), session %s, %d messages, %d tools",
			r.Time.Format("15:04:05.000"), r.Turn, r.Retry, r.Side, r.Header.Get("X-Claude-Code-Session-Id"), len(r.Messages), len(r.Tools))
	}
}

// greetPR files the greeting issue, labels it, approves the plan and
// returns the issue's number, the plan comment and the one PR.
func greetPR(t *testing.T, l *loop) (int, string, githubtest.Issue) {
	t.Helper()
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	plan := l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	l.command(n, "/approve")
	l.waitComment(n, "🚀 Opened", 4*time.Minute)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want 1 PR, got %d", len(prs))
	}
	return n, plan, prs[0]
}

// wantSandboxTokens: two sandboxes, two tokens, the plan run's read token
// and the execute run's write token; the reviewer's pass ran in the
// execute run's sandbox and got none.
func wantSandboxTokens(t *testing.T, l *loop) {
	t.Helper()
	var perms []string
	for _, tok := range l.gh.Tokens() {
		if len(tok.Repositories) > 0 {
			perms = append(perms, tok.Permissions["contents"])
		}
	}
	if strings.Join(perms, ",") != "read,write" {
		t.Errorf("tokens minted for sandboxes: %v, want read (plan), write (execute)", perms)
	}
}
