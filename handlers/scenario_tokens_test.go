package handlers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// sandboxTokens returns the tokens minted for sandboxes: narrowed to a
// repository, unlike the bot's own installation tokens.
func (h *harness) sandboxTokens() []githubtest.Token {
	var out []githubtest.Token
	for _, t := range h.gh.Tokens() {
		if len(t.Repositories) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// token returns a minted token, failing the test if the fake never minted it.
func (h *harness) token(value string) githubtest.Token {
	h.t.Helper()
	t, ok := h.gh.Token(value)
	if !ok {
		h.t.Fatal("the run's token was not minted by the fake GitHub")
	}
	return t
}

// labelled opens an issue, labels it as a writer in delivery, and returns
// the issue and the run it started.
func (h *harness) labelled(delivery string) (int, dispatch.RunSpec) {
	h.t.Helper()
	n := h.gh.AddIssue(testRepo, writer, "Task", "")
	h.label(n, writer, delivery)
	return n, h.waitSubmitted(1)[0]
}

// requireLive fails unless every token the run was given is still valid.
func (h *harness) requireLive(taskID string) {
	h.t.Helper()
	for i, v := range h.backend.Tokens(taskID) {
		if h.token(v).Revoked() {
			h.t.Fatalf("token %d of %s was revoked while the run lives", i+1, taskID)
		}
	}
}

// requireRevokedAfter waits until every token the run was given is
// revoked, and checks none was revoked before the run ended at end.
func (h *harness) requireRevokedAfter(taskID string, end time.Time) {
	h.t.Helper()
	toks := h.backend.Tokens(taskID)
	if len(toks) == 0 {
		h.t.Fatalf("run %s was given no token", taskID)
	}
	for i, tok := range h.gh.WaitRevoked(10*time.Second, toks...) {
		if tok.RevokedAt.Before(end) {
			h.t.Errorf("token %d of %s revoked at %s, before the run ended at %s", i+1, taskID, tok.RevokedAt, end)
		}
	}
	for _, v := range toks {
		if strings.Contains(h.logs.String(), v) {
			h.t.Fatal("a sandbox token reached the bot's log")
		}
	}
}

// Plan runs get contents:read, runs that push contents:write, each for the
// one repository; the plan token really cannot push (the fake refuses it
// as GitHub does), and once revoked it cannot even clone.
func TestTokensByMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting", "")
	h.label(n, writer, "d-modes")
	plan := h.waitSubmitted(1)[0]
	tok := h.token(plan.Token)
	if len(tok.Repositories) != 1 || tok.Repositories[0] != "hello" || len(tok.Permissions) != 1 || tok.Permissions["contents"] != "read" {
		t.Fatalf("plan token: repos %v perms %v, want [hello] contents:read only", tok.Repositories, tok.Permissions)
	}

	work := filepath.Join(t.TempDir(), "w")
	if out, err := h.gh.GitAs("", plan.Token, "clone", "-q", h.gh.GitURL(testRepo), work); err != nil {
		t.Fatalf("clone with the plan token: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(work, "evil.txt"), []byte("pwned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.gh.GitAs(work, "", "add", "evil.txt")
	h.gh.GitAs(work, "", "commit", "-qm", "evil")
	mainBefore := h.gh.BranchSHA(testRepo, "main")
	out, err := h.gh.GitAs(work, plan.Token, "push", h.gh.GitURL(testRepo), "HEAD:main")
	if err == nil || !strings.Contains(out, "Permission to "+testRepo+".git denied") {
		t.Fatalf("a push to main with the plan token was not refused with GitHub's 403:\n%s", out)
	}
	if h.gh.BranchSHA(testRepo, "main") != mainBefore {
		t.Fatal("main moved")
	}

	end := time.Now()
	h.backend.Finish(plan.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Greet."})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.requireRevokedAfter(plan.Order.TaskID, end)
	if out, err := h.gh.GitAs("", plan.Token, "ls-remote", h.gh.GitURL(testRepo)); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("the revoked plan token still reads the repository:\n%s", out)
	}

	h.comment(n, writer, "/approve")
	exec := h.waitSubmitted(2)[1]
	if p := h.token(exec.Token).Permissions; len(p) != 1 || p["contents"] != "write" {
		t.Fatalf("execute token permissions %v, want contents:write only", p)
	}
	h.requireLive(exec.Order.TaskID)
	// An interrupted execute run continues with a write token of its own.
	h.backend.Finish(exec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModeExecute, Status: dispatch.StatusInterrupted, Branch: exec.Order.TargetBranch})
	cont := h.waitSubmitted(3)[2]
	if p := h.token(cont.Token).Permissions; cont.Order.Mode != dispatch.ModeContinue || p["contents"] != "write" {
		t.Fatalf("%s run token permissions %v, want contents:write", cont.Order.Mode, p)
	}
	h.requireLive(cont.Order.TaskID)
}

// refusingBackend refuses every submission, as a Nomad cluster that is down.
type refusingBackend struct{ *backendtest.Memory }

// existingBackend answers every submission "exists already", as it does
// for a second bot replica that lost the race for the same task.
type existingBackend struct{ *backendtest.Memory }

// Every token minted for a sandbox is revoked when its run ends, whatever
// the outcome, and not before.
func TestTokensRevokedWhateverTheOutcome(t *testing.T) {
	t.Parallel()
	ends := map[string]func(h *harness, n int, spec dispatch.RunSpec){
		"completed": func(h *harness, n int, spec dispatch.RunSpec) {
			h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do."})
			h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
		},
		"failed": func(h *harness, n int, spec dispatch.RunSpec) {
			h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusFailed, Error: &dispatch.RunError{Message: "boom"}})
			h.waitComment(n, "failure", func(c string) bool { return strings.Contains(c, `"kind":"failure"`) })
		},
		"timed out": func(h *harness, n int, spec dispatch.RunSpec) {
			h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusTimeout})
			h.waitComment(n, "failure", func(c string) bool { return strings.Contains(c, `"kind":"failure"`) })
		},
		"aborted": func(h *harness, n int, spec dispatch.RunSpec) {
			h.comment(n, writer, "/abort")
			h.waitComment(n, "aborted", func(c string) bool { return strings.Contains(c, "was aborted") })
		},
		"lost without a receipt": func(h *harness, n int, spec dispatch.RunSpec) {
			h.backend.Finish(spec.Order.TaskID, nil)
			h.waitSubmitted(2) // a plan run is started over
		},
		"vanished from the backend": func(h *harness, n int, spec dispatch.RunSpec) {
			if err := h.backend.Cleanup(context.Background(), spec.Order.TaskID); err != nil {
				h.t.Fatal(err)
			}
			h.waitSubmitted(2)
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil, map[string]string{"SANDBOX_MAX_CONTINUES": "1"})
			n, spec := h.labelled("d-" + strings.ReplaceAll(name, " ", "-"))
			h.requireLive(spec.Order.TaskID)
			at := time.Now()
			end(h, n, spec)
			h.requireRevokedAfter(spec.Order.TaskID, at)
			// A run started after this one keeps its token.
			for _, later := range h.backend.Specs()[1:] {
				h.requireLive(later.Order.TaskID)
			}
		})
	}

	// Nobody holds the token of a run that was never started: the
	// submission failed, or another replica's run with that id exists.
	for name, backend := range map[string]func(*backendtest.Memory) dispatch.Backend{
		"submission failed":   func(m *backendtest.Memory) dispatch.Backend { return refusingBackend{m} },
		"run existed already": func(m *backendtest.Memory) dispatch.Backend { return existingBackend{m} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil, nil)
			h.stop()
			// A short dispatch deadline: the refused submission is
			// retried within it before the failure is reported.
			h.startWith(backend(h.backend), map[string]string{"SANDBOX_DISPATCH_DEADLINE": "300ms"})
			n := h.gh.AddIssue(testRepo, writer, "Task", "")
			h.label(n, writer, "d-"+strings.ReplaceAll(name, " ", "-"))
			h.gh.WaitFor(10*time.Second, "a minted sandbox token", func() bool { return len(h.sandboxTokens()) == 1 })
			h.gh.WaitRevoked(10*time.Second, h.sandboxTokens()[0].Value)
		})
	}
}

func (f refusingBackend) Submit(context.Context, dispatch.RunSpec) (bool, error) {
	return false, errors.New("nomad: connection refused")
}

func (e existingBackend) Submit(context.Context, dispatch.RunSpec) (bool, error) { return false, nil }

// A revocation GitHub fails is retried; one that keeps failing is logged
// without the token, and the result is posted all the same.
func TestRevocationFailuresAreRetriedNeverFatal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		failures int
		revoked  bool
	}{{"retried", 1, true}, {"given up", 1000, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil, nil)
			n, spec := h.labelled("d-revoke")
			h.gh.FailRevocations(tc.failures)
			h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do."})
			h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
			if got := h.token(spec.Token).Revoked(); got != tc.revoked {
				t.Fatalf("revoked = %v, want %v", got, tc.revoked)
			}
			logs := h.logs.String()
			if strings.Contains(logs, spec.Token) {
				t.Fatal("the token reached the bot's log")
			}
			if !tc.revoked && !strings.Contains(logs, "could not revoke a sandbox token") {
				t.Fatalf("a failed revocation must be logged:\n%s", logs)
			}
		})
	}
}

// A bot restarted while a run lives reads the run's token back from the
// backend, and revokes it when the run ends.
func TestRestartedBotRevokesTokenOfEarlierRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, spec := h.labelled("d-restart")
	h.stop()
	h.start(nil)
	h.requireLive(spec.Order.TaskID)
	end := time.Now()
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do."})
	h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	h.requireRevokedAfter(spec.Order.TaskID, end)
}
