package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// Fake credentials shaped like real ones (no real key is ever in a test).
const (
	e2eAWSKey = "AKIAZ7XQ3MRT5LW2KVNB"
	e2eToken  = "9f8Kq2LmX7vB4nR1tY6wZ3pJ0sD5hG8c"
)

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
		}, Usage: usage(1500, 40)},
		{Text: "Added greet.txt.\n\n## Outside the approved plan\n- `Makefile` — a target that prints the greeting", Usage: usage(1700, 20)},
		// repair 1: the secret scan and the advisory
		{ToolCalls: []modeltest.ToolCall{
			write("config.go", "package main\n\nimport \"os\"\n\nvar awsKey = os.Getenv(\"AWS_ACCESS_KEY_ID\")\n"),
			write("package-lock.json", lockWith("1.3.1")),
		}, Usage: usage(1800, 30)},
		{Text: "Read the key from the environment; left-pad 1.3.1.", Usage: usage(1900, 10)},
		// the reviewer's pass
		{Text: "**Risks**\n- config.go reads AWS_ACCESS_KEY_ID unchecked\n\n**Missing tests**\n- none\n\n**Deviations**\n- config.go is not in the plan", Usage: usage(2500, 50)},
	}
}

// The checks before the PR through the whole loop: the real bot, the fake
// GitHub, the real sandbox image on the Docker backend (runner and agent
// as different users), OpenCode on the scripted model, an OSV fixture the
// operator mounts. The PR body shows the four parts; the branch's history
// never held the secrets; the reviewer's pass got no token of its own.
func TestE2EChecksBeforeThePR(t *testing.T) {
	osv := osvFixture(t)
	l := startLoop(t, loopOptions{script: checksScript(), env: []string{"SANDBOX_OSV_DIR=" + osv},
		sandboxYML: "validate:\n  greeting: grep -q hello greet.txt\nreview:\n  enabled: true\n",
		files: map[string]string{"README.md": "# demo\n", "go.mod": "module example.com/demo\n\ngo 1.22\n",
			"package-lock.json": `{"name":"demo","lockfileVersion":3,"requires":true,"packages":{"":{"name":"demo"}}}` + "\n"}})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	planComment := l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	if !strings.Contains(planComment, `"files":[{"path":"greet.txt","note":"the greeting"}`) {
		t.Fatalf("the plan comment's marker lacks the plan's files:\n%s", planComment)
	}
	l.command(n, "/approve")
	l.waitComment(n, "🚀 Opened", 4*time.Minute)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want 1 PR, got %d", len(prs))
	}
	pr := prs[0]
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
	for _, v := range []string{e2eAWSKey, e2eToken} {
		if strings.Contains(string(log), v) || strings.Contains(body, v) {
			t.Fatalf("%s reached GitHub", v)
		}
		for _, c := range l.gh.Issue(e2eRepo, n).Comments {
			if strings.Contains(c.Body, v) {
				t.Fatalf("%s reached a comment", v)
			}
		}
	}
	// Two sandboxes, two tokens: the plan run's read token and the execute
	// run's write token; the reviewer's pass ran in the execute run's
	// sandbox and got none.
	var perms []string
	for _, tok := range l.gh.Tokens() {
		if len(tok.Repositories) > 0 {
			perms = append(perms, tok.Permissions["contents"])
		}
	}
	if strings.Join(perms, ",") != "read,write" {
		t.Errorf("tokens minted for sandboxes: %v, want read (plan), write (execute)", perms)
	}
	if t.Failed() {
		t.Logf("PR body:\n%s", body)
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
