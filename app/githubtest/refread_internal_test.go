package githubtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A branch read from the repository's files is what git says it is:
// loose, packed, missing, and a symbolic ref left to git; a file read at a
// branch follows the branch when it moves.
func TestRefsReadAsGitReadsThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "--bare", "-b", "main")
	commit := func(content string, parents ...string) string {
		blob := strings.TrimSpace(runIn(t, dir, content, "hash-object", "-w", "--stdin"))
		tree := strings.TrimSpace(runIn(t, dir, "100644 blob "+blob+"\t.sandbox.yml\n", "mktree"))
		args := []string{"commit-tree", tree, "-m", content}
		for _, p := range parents {
			args = append(args, "-p", p)
		}
		return git(args...)
	}
	one := commit("one")
	git("update-ref", "refs/heads/main", one)
	git("update-ref", "refs/heads/packed", one)
	git("pack-refs", "--all")
	two := commit("two", one)
	git("update-ref", "refs/heads/main", two)

	for _, c := range []struct{ branch, want string }{{"main", two}, {"packed", one}, {"none", ""}} {
		if got := branchSHA(dir, c.branch); got != c.want || got != gitOrEmpty(dir, "refs/heads/"+c.branch) {
			t.Errorf("branch %s: %q, want %q", c.branch, got, c.want)
		}
	}
	if _, _, ok := readRef(dir, "refs/heads/main~1"); ok {
		t.Error("an expression was read as a ref")
	}
	git("symbolic-ref", "refs/heads/alias", "refs/heads/main")
	if _, _, ok := readRef(dir, "refs/heads/alias"); ok {
		t.Error("a symbolic ref was read from its file")
	}

	s := &Server{files: map[string]fileRead{}}
	if got, ok := s.fileAt(dir, "main", ".sandbox.yml"); !ok || string(got) != "two" {
		t.Errorf("file at main: %q, %v", got, ok)
	}
	three := commit("three", two)
	git("update-ref", "refs/heads/main", three)
	if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte(three+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.fileAt(dir, "main", ".sandbox.yml"); !ok || string(got) != "three" {
		t.Errorf("file at main after it moved: %q, %v", got, ok)
	}
	if _, ok := s.fileAt(dir, one, "absent.txt"); ok {
		t.Error("a file that is not there was found")
	}
}

func runIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

func gitOrEmpty(dir, ref string) string {
	out, _ := exec.Command("git", "--git-dir", dir, "rev-parse", "--verify", "-q", ref).Output()
	return strings.TrimSpace(string(out))
}
