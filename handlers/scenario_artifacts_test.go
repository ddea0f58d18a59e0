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

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
)

// A task run's agent (a command, run by the real sandbox-runner on the
// process backend) leaves a report, a binary file in a subdirectory, a
// file whose name is markdown, a link to a file outside its directory and
// a file over the per-file cap. The bot stores what is within the caps on
// the orphan branch agent-artifacts/<task-id> of the fake's real git
// repository, links the branch and every file, names what it skipped, and
// the task's own token stays read-only.
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
  echo '{"type":"step_finish","tokens":{"input":10,"output":5},"cost_usd":0.01}'
  echo "Wrote the report."
`

func TestTaskArtifactsOnOrphanBranch(t *testing.T) {
	t.Parallel()
	runner := testenv.BuildCommand(t, "sandbox-runner")
	// The agent waits for the test to let it finish (after the bot's
	// acknowledgement is posted).
	gate := filepath.Join(t.TempDir(), "gate")
	h := newHarness(t, map[string]string{".sandbox.yml": strings.Replace(artifactsSandboxYML, "GATE", gate, 1), "README.md": "# hello\n"}, nil)
	h.stop()
	b, err := process.New(process.Options{Runner: runner, DataDir: t.TempDir(), Warnings: &strings.Builder{}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot log:\n%s", h.logs.String())
		}
	})
	h.startWith(b, map[string]string{"GITHUB_WEB_URL": h.gh.WebURL()})
	n := h.gh.AddIssue(testRepo, writer, "Write a report", "Summarise the project.")
	delivery := fmt.Sprintf("d-artifacts-%d", time.Now().UnixNano())
	h.label(n, writer, delivery)
	var taskID string
	h.gh.WaitFor(30*time.Second, "the task acknowledged", func() bool {
		for _, c := range h.botComments(n) {
			if m := taskIDRE.FindStringSubmatch(c); m != nil && strings.Contains(c, `"kind":"ack"`) {
				taskID = m[1]
				return true
			}
		}
		return false
	})
	// The first try to post the result fails for a passing reason: the
	// retry finds the branch made and must write nothing again.
	h.gh.FailNext("POST", fmt.Sprintf("/issues/%d/comments", n), 502, 1)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
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
	want := map[string]string{"report.md": "# Report\n\nAll good.\n", "data/blob.bin": "bin\x00ary\xff", weird: "x", "stolen.txt": "[REDACTED]"}
	got := h.gh.TreeFiles(testRepo, commit)
	if len(got) != len(want) {
		t.Errorf("the branch holds %v; want exactly %v", keys(got), keys(want))
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s on the branch is %q; want %q", p, got[p], c)
		}
	}

	web := h.gh.WebURL() + "/" + testRepo
	for _, s := range []string{
		"[`" + branch + "`](" + web + "/tree/" + branch + ")",
		"[`report.md`](" + web + "/blob/" + commit + "/report.md)",
		"[`data/blob.bin`](" + web + "/blob/" + commit + "/data/blob.bin)",
		// The name is shown in a code span, its backticks made quotes,
		// and its link goes to the escaped path.
		"[`a [link](javascript:x) 'x' @alice <b>.md`](" + web + "/blob/" + commit + "/" + url.PathEscape(weird) + ")",
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

	// One blob (the binary file; text goes inline in the tree), one tree,
	// one commit, one ref, though the result was posted twice over.
	for _, w := range []struct {
		req  string
		want int
	}{
		{"POST /repos/" + testRepo + "/git/blobs", 1}, {"POST /repos/" + testRepo + "/git/trees", 1},
		{"POST /repos/" + testRepo + "/git/commits", 1}, {"POST /repos/" + testRepo + "/git/refs", 1},
		{"PATCH /repos/" + testRepo + "/git/refs", 0},
	} {
		if got := h.gh.CountRequests(w.req); got != w.want {
			t.Errorf("%s: %d requests; want %d", w.req, got, w.want)
		}
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
	h.label(n, writer, delivery)
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
	if refs := h.gh.RefsWithPrefix(testRepo, "refs/heads/agent-artifacts/"); len(refs) != 1 {
		t.Errorf("artifact branches %v; want one", refs)
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
