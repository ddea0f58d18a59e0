package handlers_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// TestPreviewOfAPullRequest: /preview on the agent's PR starts a preview
// sandbox of the PR's head (no token, the code as GitHub's tarball, the
// server's time), posts one comment with the link, edits it when the
// preview ends, and frees its lock; a fork's PR gets none.
func TestPreviewOfAPullRequest(t *testing.T) {
	t.Parallel()
	files := map[string]string{".sandbox.yml": defaultSandboxYML + "dev: { command: node server.js, port: 5173, preview_secrets: [PREVIEW_KEY] }\n", "server.js": "// the app\n"}
	h := newHarness(t, files, map[string]string{"SANDBOX_PREVIEW_DURATION": "90s", "SANDBOX_PASS_ENV": "PREVIEW_KEY,OTHER_KEY",
		"SANDBOX_PUBLIC_URL": "https://bot.example", "GITHUB_OAUTH_CLIENT_ID": "Iv1.x", "GITHUB_OAUTH_CLIENT_SECRET": "oauth-secret"})
	issue := h.gh.AddIssue(testRepo, writer, "Feature", "")
	pr := h.agentPR(issue)
	// The agent's branch rewrites the configuration: its dev command, its
	// setup and the secrets a preview gets. None of it counts.
	head := h.gh.Issue(testRepo, pr).PR.Head
	h.gh.CommitFile(testRepo, head, ".sandbox.yml", defaultSandboxYML+"lifecycle: { setup: [cat /proc/1/environ] }\n"+
		"dev: { command: cat /sandbox/secrets/gateway/providers.json, port: 5174, preview_secrets: [PREVIEW_KEY, OTHER_KEY] }\n", "Mine now")
	h.gh.CommitFile(testRepo, head, "server.js", "// the agent's app\n", "The app")
	h.comment(pr, reader, "/preview")
	h.comment(pr, writer, "/preview")
	spec := h.waitSubmitted(1)[0]
	if spec.Order.Mode != dispatch.ModePreview || spec.Token != "" || spec.Order.PreviewSeconds != 90 || spec.Order.Config.Dev.Port != 5173 {
		t.Fatalf("preview run: mode %s, token %q, %d s, dev %+v; want a preview without a token for 90 s", spec.Order.Mode, spec.Token, spec.Order.PreviewSeconds, spec.Order.Config.Dev)
	}
	if c := spec.Order.Config; c.Dev.Command != "node server.js" || len(c.Lifecycle.Setup) != 0 {
		t.Errorf("the preview's configuration: dev %+v, setup %v; want the base branch's, not the pull request's", c.Dev, c.Lifecycle.Setup)
	}
	if got := spec.Order.SecretEnv; len(got) != 1 || got[0] != "PREVIEW_KEY" {
		t.Errorf("the preview's secrets: %v; want only the base branch's dev.preview_secrets (PREVIEW_KEY)", got)
	}
	if got := untar(t, spec.Source); !strings.Contains(got["server.js"], "the agent's app") {
		t.Errorf("the preview's code: %v, want the PR head's files", got)
	}
	id := spec.Order.TaskID
	link := "https://bot.example/runs/" + id + "/preview/"
	h.waitComment(pr, "the preview's link", func(c string) bool { return strings.Contains(c, link) && strings.Contains(c, "for 2 minutes") })
	// A second /preview while it runs names the running one.
	h.comment(pr, writer, "/preview")
	h.waitComment(pr, "the running preview named", func(c string) bool {
		return strings.Contains(c, "runs already") && strings.Contains(c, "https://bot.example/runs/"+id)
	})
	h.backend.Finish(id, &dispatch.Result{TaskID: id, Mode: dispatch.ModePreview, Status: dispatch.StatusCompleted})
	h.waitComment(pr, "the preview's comment edited at its end", func(c string) bool { return strings.Contains(c, "has ended") })
	h.gh.WaitFor(5e9, "the preview's lock freed", func() bool { return h.backend.LockHolder("preview/"+dispatch.LockKey(testRepo, pr)) == "" })
	for _, c := range h.gh.Issue(testRepo, pr).Comments {
		if strings.Contains(c.Body, link) {
			t.Errorf("the ended preview's comment still links to it:\n%s", c.Body)
		}
	}

	// A fork's pull request is not the agent's: no preview.
	fork := h.gh.AddForkPullRequest(testRepo, "mallory", "Mine", "mallory/hello", "feature", "main")
	h.comment(fork, writer, "/preview")
	h.waitComment(fork, "the refusal on a fork's PR", func(c string) bool { return strings.Contains(c, "not opened by the agent") })
	if n := len(h.backend.Specs()); n != 1 {
		t.Errorf("%d runs started; a fork's PR and a reader must start none", n)
	}
}

// TestPreviewSecretsTheBotDoesNotPass: a base branch that names, for its
// previews, a secret the bot does not pass to sandboxes gets a refusal
// naming it, and no preview.
func TestPreviewSecretsTheBotDoesNotPass(t *testing.T) {
	t.Parallel()
	files := map[string]string{".sandbox.yml": defaultSandboxYML + "dev: { command: node server.js, port: 5173, preview_secrets: [NOT_PASSED] }\n"}
	h := newHarness(t, files, map[string]string{"SANDBOX_PUBLIC_URL": "https://bot.example", "GITHUB_OAUTH_CLIENT_ID": "Iv1.x", "GITHUB_OAUTH_CLIENT_SECRET": "oauth-secret"})
	pr := h.agentPR(h.gh.AddIssue(testRepo, writer, "Feature", ""))
	h.comment(pr, writer, "/preview")
	h.waitComment(pr, "the refusal naming the secret", func(c string) bool {
		return strings.Contains(c, "NOT_PASSED") && strings.Contains(c, "SANDBOX_PASS_ENV")
	})
	if n := len(h.backend.Specs()); n != 0 {
		t.Errorf("%d runs started; want none", n)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if _, name, ok := strings.Cut(hd.Name, "/"); ok && name != "" {
			out[name] = string(body)
		}
	}
}

// TestPreviewRefusedWhenTheCapsAreFull: a preview waits in no queue. With
// the server's one slot taken by a plan run, /preview is refused with a
// reply that says why, and nothing is submitted.
func TestPreviewRefusedWhenTheCapsAreFull(t *testing.T) {
	t.Parallel()
	files := map[string]string{".sandbox.yml": defaultSandboxYML + "dev: { command: node server.js, port: 5173 }\n", "server.js": "// the app\n"}
	h := newHarness(t, files, map[string]string{"SANDBOX_MAX_RUNS": "1", "SANDBOX_PUBLIC_URL": "https://bot.example",
		"GITHUB_OAUTH_CLIENT_ID": "Iv1.x", "GITHUB_OAUTH_CLIENT_SECRET": "oauth-secret"})
	pr := h.agentPR(h.gh.AddIssue(testRepo, writer, "Feature", ""))
	busy := h.gh.AddIssue(testRepo, writer, "Another", "")
	h.label(busy, writer, "d-busy")
	if n := len(h.waitSubmitted(1)); n != 1 {
		t.Fatalf("%d runs submitted, want the plan run holding the one slot", n)
	}
	h.comment(pr, writer, "/preview")
	h.waitComment(pr, "the refusal", func(c string) bool { return strings.Contains(c, "every slot for runs is taken") })
	if specs := h.backend.Specs(); len(specs) != 1 || specs[0].Order.Mode == dispatch.ModePreview {
		t.Errorf("%d runs submitted; a preview over the caps must start none", len(specs))
	}
}
