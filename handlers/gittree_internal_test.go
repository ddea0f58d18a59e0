package handlers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The tree id the bot computes to see that a branch already holds a run's
// artifacts is the one git computes for the same files: names that sort
// around a directory's (git compares a directory as "name/"), nesting,
// binary content, an empty file.
func TestArtifactTreeSHAMatchesGit(t *testing.T) {
	t.Parallel()
	files := []dispatch.Artifact{
		{Path: "a.b", Data: []byte("dot")}, {Path: "a-b", Data: []byte("dash")}, {Path: "a0", Data: []byte("zero")},
		{Path: "a/x.txt", Data: []byte("in a")}, {Path: "a/b/c.bin", Data: []byte{0, 1, 2, 0xff}},
		{Path: "empty", Data: nil}, {Path: "name with spaces [x].md", Data: []byte("# x\n")}, {Path: "ü.txt", Data: []byte("u")},
	}
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	if want, got := git("write-tree"), artifactTreeSHA(files); got != want {
		t.Fatalf("artifactTreeSHA = %s; git write-tree = %s", got, want)
	}
}
