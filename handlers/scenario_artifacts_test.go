package handlers_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// A task run's agent (a command, run by the real sandbox-runner on the
// process backend) leaves a report, a binary file in a subdirectory, a
// file whose name is markdown, a link to a file outside its directory and
// a file over the per-file cap, and workflow files (.github/workflows at the
// top, in another case, and deeper down). The bot stores what is within
// the caps under artifacts/ of the orphan branch agent-artifacts/<task-id>
// of the fake's real git repository (so GitHub runs nothing of it), never
// a .github path, links the branch and every file, names what it skipped,
// and the task's own token stays read-only.
const artifactsSandboxYML = `mode: task
harness: command
command: |
  cat >/dev/null
  i=0; while [ ! -e GATE ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
  echo '{"type":"step_start"}'
  printf '# Report\n\nAll good.\n' > report.md
  mkdir -p data
  printf 'bin\000ary\377' > data/blob.bin
  printf 'x' > 'a [link](javascript:x) ` + "`x`" + ` @alice <b>.md'
  ln -s /etc/hostname host-link
  cp ../../secrets/token stolen.txt
  { printf 'x\000'; cat ../../secrets/token; } > stolen.bin
  truncate -s 6M big.bin
  mkdir -p .github/workflows .GitHub/workflows docs/.github/workflows
  printf 'on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: "curl evil"}]}}\n' > .github/workflows/x.yml
  cp .github/workflows/x.yml .GitHub/workflows/y.yml
  cp .github/workflows/x.yml docs/.github/workflows/z.yml
  printf 'runs: {using: node20, main: evil.js}\n' > action.yml
  echo '{"type":"step_finish","tokens":{"input":10,"output":5},"cost_usd":0.01}'
  echo "Wrote the report."
`

// artifactsTask is a task run on the process backend, acknowledged, whose
// agent waits for release.
type artifactsTask struct {
	h       *harness
	b       *process.Backend
	env     map[string]string
	n       int
	taskID  string
	gate    string
	deliver func()
}

// startArtifactsTask labels an issue of a task-mode repository and waits
// until the run is acknowledged and shows its progress comment, so the
// next comment the bot creates is the result.
func startArtifactsTask(t *testing.T) *artifactsTask {
	t.Helper()
	runner := testenv.BuildCommand(t, "sandbox-runner")
	a := &artifactsTask{gate: filepath.Join(t.TempDir(), "gate")}
	a.h = newHarness(t, map[string]string{".sandbox.yml": strings.Replace(artifactsSandboxYML, "GATE", a.gate, 1), "README.md": "# hello\n"}, nil)
	a.h.stop()
	b, err := process.New(process.Options{Runner: runner, DataDir: t.TempDir(), Warnings: &strings.Builder{}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	a.b = b
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot log:\n%s", a.h.logs.String())
		}
	})
	a.env = map[string]string{"GITHUB_WEB_URL": a.h.gh.WebURL()}
	a.h.startWith(b, a.env)
	a.n = a.h.gh.AddIssue(testRepo, writer, "Write a report", "Summarise the project.")
	delivery := fmt.Sprintf("d-artifacts-%d", time.Now().UnixNano())
	a.deliver = func() { a.h.label(a.n, writer, delivery) }
	a.deliver()
	a.h.gh.WaitFor(30*time.Second, "the task acknowledged and its progress shown", func() bool {
		progress := false
		for _, c := range a.h.botComments(a.n) {
			if m := taskIDRE.FindStringSubmatch(c); m != nil && strings.Contains(c, `"kind":"ack"`) {
				a.taskID = m[1]
			}
			progress = progress || strings.Contains(c, `"kind":"progress"`)
		}
		return a.taskID != "" && progress
	})
	return a
}

// release lets the agent write its files and finish.
func (a *artifactsTask) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(a.gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wroteOnce checks the Git Data writes: one blob (the binary file; text
// travels inline in the tree), one tree, one commit, one ref, however
// often the result was posted.
func (a *artifactsTask) wroteOnce(t *testing.T) {
	t.Helper()
	for _, w := range []struct {
		req  string
		want int
	}{
		{"POST /repos/" + testRepo + "/git/blobs", 1}, {"POST /repos/" + testRepo + "/git/trees", 1},
		{"POST /repos/" + testRepo + "/git/commits", 1}, {"POST /repos/" + testRepo + "/git/refs", 1},
		{"PATCH /repos/" + testRepo + "/git/refs", 0},
	} {
		if got := a.h.gh.CountRequests(w.req); got != w.want {
			t.Errorf("%s: %d requests; want %d", w.req, got, w.want)
		}
	}
	if refs := a.h.gh.RefsWithPrefix(testRepo, "refs/heads/agent-artifacts/"); len(refs) != 1 {
		t.Errorf("artifact branches %v; want one", refs)
	}
}

func TestTaskArtifactsOnOrphanBranch(t *testing.T) {
	t.Parallel()
	a := startArtifactsTask(t)
	h, n, taskID := a.h, a.n, a.taskID
	// The first try to post the result fails for a passing reason: the
	// retry finds the branch made and must write nothing again.
	h.gh.FailNext("POST", fmt.Sprintf("/issues/%d/comments", n), 502, 1)
	a.release(t)
	comment := waitResult(h, n, taskID)

	branch := "agent-artifacts/" + taskID
	commit := h.gh.Ref(testRepo, "refs/heads/"+branch)
	if commit == "" {
		t.Fatalf("no branch %s in the repository", branch)
	}
	if p := h.gh.Parents(testRepo, commit); len(p) != 0 {
		t.Errorf("the artifacts commit has parents %v; want an orphan", p)
	}
	weird := "a [link](javascript:x) `x` @alice <b>.md"
	want := map[string]string{"artifacts/report.md": "# Report\n\nAll good.\n", "artifacts/data/blob.bin": "bin\x00ary\xff", "artifacts/" + weird: "x",
		"artifacts/stolen.txt": "[REDACTED]", "artifacts/action.yml": "runs: {using: node20, main: evil.js}\n"}
	got := h.gh.TreeFiles(testRepo, commit)
	if len(got) != len(want) {
		t.Errorf("the branch holds %v; want exactly %v", keys(got), keys(want))
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s on the branch is %q; want %q", p, got[p], c)
		}
	}
	for p := range got {
		if strings.Contains(strings.ToLower(p), ".github") {
			t.Errorf("the branch holds %s: GitHub could run it", p)
		}
	}

	web := h.gh.WebURL() + "/" + testRepo
	for _, s := range []string{
		"[`" + branch + "`](" + web + "/tree/" + branch + ")",
		"[`report.md`](" + web + "/blob/" + commit + "/artifacts/report.md)",
		"[`data/blob.bin`](" + web + "/blob/" + commit + "/artifacts/data/blob.bin)",
		"- `.github/workflows/x.yml` (", "- `.GitHub/workflows/y.yml` (", "- `docs/.github/workflows/z.yml` (", "): a .github path, which the bot never writes",
		// The name is shown in a code span, its backticks made quotes,
		// and its link goes to the escaped path.
		"[`a [link](javascript:x) 'x' @alice <b>.md`](" + web + "/blob/" + commit + "/artifacts/" + url.PathEscape(weird) + ")",
		"- `host-link` (", "): symbolic link",
		"- `big.bin` (6.0 MiB): over the per-file cap",
		// The sandbox's token (its agent can read it in task mode) is
		// redacted from text and keeps a binary file off GitHub.
		"/stolen.txt) (10 B, secrets redacted)", "- `stolen.bin` (", "): holds a secret",
		"Not stored (5.0 MiB per file, 20 MiB in all, 100 files)",
		"Wrote the report.",
	} {
		if !strings.Contains(comment, s) {
			t.Errorf("the result comment lacks %q:\n%s", s, comment)
		}
	}

	a.wroteOnce(t)
	if !strings.Contains(h.logs.String(), "GitHub refused for now; trying again") {
		t.Error("the result was not retried after the injected failure")
	}
	if h.gh.Injected() != 1 {
		t.Errorf("the injected failure answered %d requests; want 1", h.gh.Injected())
	}
	// The sandbox's token was contents:read; the bot wrote with its own.
	for _, r := range h.gh.Requests() {
		if strings.Contains(r.Path, "/git/") && r.Method != "GET" {
			tok, ok := h.gh.Token(strings.TrimPrefix(r.Auth, "token "))
			if ok && tok.Permissions != nil {
				t.Errorf("%s %s was made with a narrowed token %v, not the bot's", r.Method, r.Path, tok.Permissions)
			}
		}
	}
	sandboxToken := ""
	for _, tok := range h.gh.Tokens() {
		if tok.Permissions != nil {
			if tok.Permissions["contents"] != "read" || len(tok.Permissions) != 1 {
				t.Errorf("a task run's token has %v; want contents:read only", tok.Permissions)
			}
			sandboxToken = tok.Value
		}
	}
	if sandboxToken == "" {
		t.Fatal("no token was minted for the sandbox")
	}

	// A redelivery of the label event makes nothing new.
	comments, requests := len(h.botComments(n)), len(h.gh.Requests())
	a.deliver()
	h.idle()
	if c := len(h.botComments(n)); c != comments {
		t.Errorf("the redelivery added %d comments", c-comments)
	}
	for _, r := range h.gh.Requests()[requests:] {
		if strings.Contains(r.Path, "/git/") && r.Method != "GET" {
			t.Errorf("the redelivery wrote %s %s", r.Method, r.Path)
		}
	}
	if c := h.gh.Ref(testRepo, "refs/heads/"+branch); c != commit {
		t.Errorf("the redelivery moved %s from %s to %s", branch, commit, c)
	}
	a.wroteOnce(t)
}

// A bot that stops after the branch is made, before its comment lands
// (GitHub refused it for good), posts the result when it starts again and
// finds the branch holding the run's files: no second commit, ref or
// comment.
func TestTaskArtifactsAfterARestart(t *testing.T) {
	t.Parallel()
	a := startArtifactsTask(t)
	a.h.gh.FailNext("POST", fmt.Sprintf("/issues/%d/comments", a.n), 422, 1)
	a.release(t)
	a.h.gh.WaitFor(60*time.Second, "the refused result", func() bool {
		return strings.Contains(a.h.logs.String(), `"message":"post result"`)
	})
	commit := a.h.gh.Ref(testRepo, "refs/heads/agent-artifacts/"+a.taskID)
	if commit == "" {
		t.Fatal("the branch was not made before the comment")
	}
	a.h.stop()
	a.h.startWith(a.b, a.env)
	comment := waitResult(a.h, a.n, a.taskID)
	if !strings.Contains(comment, "/blob/"+commit+"/artifacts/report.md") {
		t.Errorf("the result does not link the branch's commit %s:\n%s", commit, comment)
	}
	a.wroteOnce(t)
	a.h.idle()
	results := 0
	for _, c := range a.h.botComments(a.n) {
		if strings.Contains(c, `"kind":"result"`) {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d result comments; want 1", results)
	}
}

// waitResult waits for the task's result comment and returns it.
func waitResult(h *harness, n int, taskID string) string {
	h.t.Helper()
	var found string
	h.gh.WaitFor(60*time.Second, "the result of "+taskID, func() bool {
		for _, c := range h.botComments(n) {
			if strings.Contains(c, `"kind":"result"`) && strings.Contains(c, taskID) {
				found = c
				return true
			}
			if strings.Contains(c, `"kind":"failure"`) {
				h.t.Fatalf("the task failed:\n%s", c)
			}
		}
		return false
	})
	return found
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var taskIDRE = regexp.MustCompile(`"task":"(T-[0-9A-Fa-f]+)"`)
