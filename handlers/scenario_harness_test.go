package handlers_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	testSecret       = "s3cret-webhook"
	testInstallation = 42
	testRepo         = "octo-org/hello"
	writer           = "alice"
	reader           = "mallory"
)

var testKey = githubtest.AppKey()

// harness is the real bot HTTP handler wired to a fake GitHub and an
// in-memory backend.
type harness struct {
	t       *testing.T
	gh      *githubtest.Server
	backend *backendtest.Memory
	srv     *app.Server
	http    *httptest.Server
	logs    *bytes.Buffer
	// data is SANDBOX_DATA_DIR, kept across restarts (the receipts store).
	data string
}

const defaultSandboxYML = `name: hello
harness: opencode
model: scripted/model
max_budget_usd: 4
validate:
  test: go test ./...
pr:
  labels: [agent-pr]
  reviewers: [alice]
`

func newHarness(t *testing.T, files map[string]string, env map[string]string) *harness {
	t.Helper()
	return newHarnessOn(t, githubtest.New(t, githubtest.Options{}), files, env)
}

// newHarnessOn is newHarness on a fake GitHub with options of its own.
func newHarnessOn(t *testing.T, gh *githubtest.Server, files map[string]string, env map[string]string) *harness {
	t.Helper()
	if files == nil {
		files = map[string]string{".sandbox.yml": defaultSandboxYML, "main.go": "package main\n"}
	}
	gh.AddRepo(testRepo, testInstallation, files)
	gh.SetPermission(testRepo, writer, "write")
	gh.SetPermission(testRepo, "maya", "maintain")
	gh.SetPermission(testRepo, reader, "read")
	h := &harness{t: t, gh: gh, backend: backendtest.NewMemory(), logs: &bytes.Buffer{}, data: t.TempDir()}
	h.start(env)
	return h
}

// start (re)starts the bot on the same fake GitHub and backend.
func (h *harness) start(env map[string]string) {
	h.t.Helper()
	h.startWith(h.backend, env)
}

// startWith starts the bot on another backend (a wrapper of h.backend).
func (h *harness) startWith(backend dispatch.Backend, env map[string]string) {
	h.t.Helper()
	vars := map[string]string{
		"GITHUB_V3_API_URL": h.gh.URL(), "GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret,
		"GITHUB_APP_PRIVATE_KEY": testKey, "SANDBOX_BACKEND": "process", "SANDBOX_PROGRESS_INTERVAL": "1ms",
		// Pacing is for GitHub's limits; the fake has none unless a
		// rate-limit test gives it one (and sets its own pace).
		"SANDBOX_GITHUB_WRITES_PER_MINUTE": "60000",
		"SANDBOX_DATA_DIR":                 h.data,
		// Review feedback waits this long for more before its revise run
		// starts; the batching tests set their own window.
		"SANDBOX_REVIEW_BATCH_WINDOW": "20ms",
		// A refused result is posted again 10 ms later, then 20, 40...
		"SANDBOX_RESULT_RETRY": "10ms",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := app.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		h.t.Fatal(err)
	}
	logger := zerolog.New(zerolog.SyncWriter(h.logs)).Level(zerolog.DebugLevel)
	srv, err := app.NewServer(cfg, backend, logger)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := srv.Start(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	h.srv = srv
	h.http = httptest.NewServer(srv.Handler())
	h.t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.http != nil {
		h.http.Close()
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.srv.Drain(ctx)
		h.srv.Stop()
		h.http = nil
	}
}

// idle waits until the bot has handled every delivery and no follower has a
// result left to post: after it, what has not happened will not.
func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
	defer cancel()
	if err := h.srv.Idle(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// payload loads a recorded webhook (file names as in githubtest/payloads)
// and points it at the fake's repository, installation and sender.
func (h *harness) payload(file, sender string, mutate func(map[string]any)) []byte {
	h.t.Helper()
	return h.gh.Payload(strings.TrimSuffix(file, ".json"), testRepo, sender, mutate)
}

func sign(body []byte, secret string) string { return githubtest.Sign(body, secret) }

// deliver posts a signed webhook and returns the status code.
func (h *harness) deliver(event, delivery string, body []byte) int {
	h.t.Helper()
	return h.deliverSigned(event, delivery, body, sign(body, testSecret))
}

func (h *harness) deliverSigned(event, delivery string, body []byte, sig string) int {
	h.t.Helper()
	return githubtest.Deliver(h.t, h.http.URL+app.WebhookPath, event, delivery, body, sig)
}

// label delivers "issue #n labeled agent" by sender.
func (h *harness) label(n int, sender, delivery string) int {
	iss := h.gh.Issue(testRepo, n)
	return h.deliver("issues", delivery, h.payload("issues.labeled.json", sender, func(m map[string]any) {
		m["label"] = map[string]any{"name": "agent"}
		issue := m["issue"].(map[string]any)
		issue["number"], issue["title"], issue["body"] = n, iss.Title, iss.Body
		var labels []any
		for _, l := range iss.Labels {
			labels = append(labels, map[string]any{"name": l})
		}
		issue["labels"] = labels
	}))
}

// comment adds a comment on the fake and delivers its issue_comment event.
func (h *harness) comment(n int, sender, body string) int {
	id, payload := h.commentEvent(n, sender, body)
	return h.deliver("issue_comment", fmt.Sprintf("comment-%d", id), payload)
}

// commentEvent adds a comment on the fake and returns its id and the
// issue_comment payload GitHub would send (and resend) for it.
func (h *harness) commentEvent(n int, sender, body string) (int64, []byte) {
	id := h.gh.AddComment(testRepo, n, sender, body)
	iss := h.gh.Issue(testRepo, n)
	return id, h.payload("issue_comment.created.json", sender, func(m map[string]any) {
		issue := m["issue"].(map[string]any)
		issue["number"], issue["title"], issue["body"] = n, iss.Title, iss.Body
		labels := []any{}
		for _, l := range iss.Labels {
			labels = append(labels, map[string]any{"name": l})
		}
		issue["labels"] = labels
		delete(issue, "pull_request")
		if iss.PR != nil {
			issue["pull_request"] = map[string]any{"url": "x"}
		}
		m["comment"] = map[string]any{"id": id, "body": body, "user": map[string]any{"login": sender, "type": "User"}}
	})
}

// waitSubmitted waits until n runs were submitted in total.
func (h *harness) waitSubmitted(n int) []dispatch.RunSpec {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
	defer cancel()
	specs, err := h.backend.WaitSubmitted(ctx, n)
	if err != nil {
		h.t.Fatalf("waiting for %d submitted runs, have %d: %v\nlogs:\n%s", n, len(specs), err, h.logs.String())
	}
	return specs
}

// botComments returns the bodies of the bot's comments on #n.
func (h *harness) botComments(n int) []string {
	var out []string
	for _, c := range h.gh.Issue(testRepo, n).Comments {
		if c.User == githubtest.AppLogin {
			out = append(out, c.Body)
		}
	}
	return out
}

func (h *harness) waitComment(n int, what string, match func(string) bool) string {
	h.t.Helper()
	var found string
	h.gh.WaitFor(10*time.Second, what, func() bool {
		for _, c := range h.botComments(n) {
			if match(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

var (
	portRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// golden compares got with testdata/golden/name, normalising the fake's
// port. Run with -update to rewrite.
var headRE = regexp.MustCompile(`"head":"[0-9a-f]{40}"`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = portRE.ReplaceAllString(got, "127.0.0.1:PORT")
	// A commit made by the fake's git has the time in its sha.
	got = headRE.ReplaceAllString(got, `"head":"SHA"`)
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./app -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from golden file (run with -update if intended)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
