package gitseed_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/gitseed"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A root commit and a child on another branch land in a bare repository
// as a person's commits would: files, modes, deletion, message, parent,
// committer, and the returned sha is the branch's head.
func TestWriteRootAndChild(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "r.git")
	if err := gitseed.InitBare(dir, "main", "[http]\n\treceivepack = true\n"); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	root, err := gitseed.Write(dir, env, gitseed.Commit{
		Branch: "main", Committer: "Ann <ann@example.com>", Mode: "100755",
		// sub.txt and sub-x sort around the directory sub as git sorts
		// them (sub/ after sub.txt, before sub-x would be wrong: fsck
		// --strict below says treeNotSorted).
		Files: map[string]string{"a.sh": "echo a\n", "sub/b.txt": "b\n", "sub.txt": "s\n", "sub-x": "x\n", "empty-is-none": ""}, Message: "Initial commit",
	})
	if err != nil {
		t.Fatal(err)
	}
	if head := git(t, dir, "rev-parse", "main"); head != root {
		t.Fatalf("main = %s, Write returned %s", head, root)
	}
	if got := git(t, dir, "ls-tree", "-r", "--name-only", "main"); got != "a.sh\nsub-x\nsub.txt\nsub/b.txt" {
		t.Fatalf("files of main:\n%s", got)
	}
	if got := git(t, dir, "log", "-1", "--format=%s|%an <%ae>|%cn <%ce>|%P", root); got != "Initial commit|Ann <ann@example.com>|Ann <ann@example.com>|" {
		t.Fatalf("root commit = %q", got)
	}
	if got := git(t, dir, "ls-tree", "-r", "main"); !strings.Contains(got, "100755 blob") || !strings.Contains(got, "sub/b.txt") {
		t.Fatalf("tree of main:\n%s", got)
	}
	// The root commit's files read from its loose objects as git shows
	// them; a path that is not there is not found, a directory is git's.
	for _, path := range []string{"a.sh", "sub/b.txt", "sub.txt"} {
		content, found, ok := gitseed.ReadLoose(dir, root, path)
		if want := git(t, dir, "show", root+":"+path); !ok || !found || strings.TrimSpace(string(content)) != want {
			t.Errorf("ReadLoose(%s) = %q, %v, %v; git shows %q", path, content, found, ok, want)
		}
	}
	for _, path := range []string{"nope", "sub/nope", "a.sh/x"} {
		if _, found, ok := gitseed.ReadLoose(dir, root, path); !ok || found {
			t.Errorf("ReadLoose(%s): found %v, ok %v; want not found", path, found, ok)
		}
	}
	if _, _, ok := gitseed.ReadLoose(dir, root, "sub"); ok {
		t.Error("ReadLoose of a directory answered; git shows a listing")
	}
	child, err := gitseed.Write(dir, env, gitseed.Commit{
		Branch: "topic", Parent: root, Committer: "Ann <ann@example.com>", Mode: "100644",
		Files: map[string]string{"a.sh": "", "c.md": "c\n"}, Message: "Change things",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "topic~1"); got != root {
		t.Fatalf("parent of topic = %s, want %s", got, root)
	}
	if got := git(t, dir, "ls-tree", "-r", "--name-only", child); got != "c.md\nsub-x\nsub.txt\nsub/b.txt" {
		t.Fatalf("files of topic = %q", got)
	}
	if got := git(t, dir, "log", "-1", "--format=%s|%an <%ae>|%cn", child); got != "Change things|Ann <ann@example.com>|Ann" {
		t.Fatalf("commit = %q", got)
	}
	if _, _, ok := gitseed.ReadLoose(dir, child, "c.md"); ok {
		t.Error("ReadLoose answered for a commit fast-import packed")
	}
	if got := git(t, dir, "cat-file", "-p", child+":c.md"); got != "c" {
		t.Fatalf("c.md = %q", got)
	}
	// The repository InitBare wrote is one git takes as its own: bare, its
	// extra configuration read, and whole.
	if got := git(t, dir, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("--is-bare-repository = %q", got)
	}
	if got := git(t, dir, "config", "http.receivepack"); got != "true" {
		t.Fatalf("http.receivepack = %q", got)
	}
	if got := git(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("HEAD = %q", got)
	}
	git(t, dir, "fsck", "--strict")
}

// A failure names the repository and the branch.
func TestWriteErrorNamesTheRepository(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "missing.git")
	_, err := gitseed.Write(dir, nil, gitseed.Commit{Branch: "main", Committer: "Ann <ann@example.com>", Mode: "100644", Message: "x"})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "main") {
		t.Fatalf("err = %v", err)
	}
}
