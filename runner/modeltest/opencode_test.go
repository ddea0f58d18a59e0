package modeltest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestOpenCodeWritesFile drives the real OpenCode CLI against the scripted
// server: the model's write tool call must land on disk.
func TestOpenCodeWritesFile(t *testing.T) {
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "hello.txt", "content": "hello from the script\n"}}}, Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 50}},
		{Text: "I wrote hello.txt.", Usage: modeltest.Usage{PromptTokens: 1200, CompletionTokens: 20}},
	})
	home := t.TempDir()
	work := t.TempDir()
	cfg, err := srv.WriteOpenCodeConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--format", "json", "--model", srv.OpenCodeModel(), "write hello.txt")
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "XDG_STATE_HOME="+filepath.Join(home, ".local/state"),
		"PWD="+work, "OPENCODE_CONFIG="+cfg, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("stdout:\n%s", stdout.String())
	t.Logf("stderr:\n%s", stderr.String())
	for _, r := range srv.Requests() {
		t.Logf("request: turn=%d title=%v tools=%v msgs=%d last=%q", r.Turn, r.Title, r.Tools, len(r.Messages), trunc(r.LastUser()))
	}
	if err != nil {
		t.Fatalf("opencode run: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(work, "hello.txt"))
	if err != nil {
		t.Fatalf("the write tool call did not create the file: %v", err)
	}
	if string(b) != "hello from the script\n" {
		t.Fatalf("hello.txt = %q", b)
	}
	if srv.Served() != 2 || srv.Exhausted() != 0 {
		t.Fatalf("served %d turns, %d past the script; want 2 and 0", srv.Served(), srv.Exhausted())
	}
	if !strings.Contains(stdout.String(), `"type":"step_finish"`) {
		t.Fatalf("no step_finish event on stdout")
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
