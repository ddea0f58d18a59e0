package handlers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
)

// writeOverride writes an operator override under dir.
func writeOverride(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name)+".tmpl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// An override that names a field its reply's data lack stops the bot at
// start, naming the file, the line and the field, rather than failing the
// reply on an issue.
func TestBrokenOverrideStopsTheStart(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{})
	dir := t.TempDir()
	path := writeOverride(t, dir, "github/abort_requested", "{{.Marker}}\nStopping `{{.TaskID}}`\nfor @{{.Requester}}.\n")
	vars := map[string]string{
		"GITHUB_V3_API_URL": gh.URL(), "GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret,
		"GITHUB_APP_PRIVATE_KEY": testKey, "SANDBOX_BACKEND": "process", "SANDBOX_TEMPLATES_DIR": dir,
	}
	cfg, err := app.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.NewServer(cfg, nil, zerolog.Nop())
	if err == nil {
		t.Fatal("a server with a broken override started")
	}
	for _, want := range []string{"SANDBOX_TEMPLATES_DIR", path, "line 3", "{{.Requester}}", "can't evaluate field Requester", "handlers.AbortRequestedData"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error %q does not say %q", err, want)
		}
	}
}

// A good override is what the bot posts.
func TestOverrideIsPosted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeOverride(t, dir, "github/nothing_to_abort", "No run here{{/* the data are empty */}}; nothing to stop.\n")
	h := newHarness(t, nil, map[string]string{"SANDBOX_TEMPLATES_DIR": dir})
	n := h.gh.AddIssue(testRepo, writer, "Abort nothing", "")
	h.comment(n, writer, "/abort")
	h.waitComment(n, "the override's reply", func(c string) bool { return c == "No run here; nothing to stop." })
}
