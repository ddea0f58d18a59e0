package gitserve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Pushes through the server may create and update refs/heads/agent/*
// branches only; everything else is refused as a whole with a message the
// git client prints, and the repository does not change.
func TestPushOnlyToAgentBranches(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	git(t, repo, "init", "--quiet")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	git(t, repo, "add", "a.txt")
	git(t, repo, "commit", "--quiet", "-m", "a")
	git(t, repo, "branch", "agent/t-1-old")
	mainBefore := git(t, repo, "rev-parse", "main")

	s, err := Start(Options{Repo: repo, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clone := filepath.Join(t.TempDir(), "c")
	git(t, "", "clone", "--quiet", withAuth(s.URL, "x", s.Token), clone)
	git(t, clone, "checkout", "--quiet", "-b", "agent/t-1-new")
	os.WriteFile(filepath.Join(clone, "b.txt"), []byte("b\n"), 0o644)
	git(t, clone, "add", "b.txt")
	git(t, clone, "commit", "--quiet", "-m", "b")
	head := git(t, clone, "rev-parse", "HEAD")

	refused := []struct {
		name string
		args []string
		ref  string
		why  string
	}{
		{"another branch", []string{"push", "origin", "HEAD:main"}, "refs/heads/main", "only refs/heads/agent/* may be pushed"},
		{"a new branch elsewhere", []string{"push", "origin", "HEAD:refs/heads/release"}, "refs/heads/release", "only refs/heads/agent/* may be pushed"},
		{"a tag", []string{"push", "origin", "HEAD:refs/tags/v1"}, "refs/tags/v1", "only refs/heads/agent/* may be pushed"},
		{"a deletion", []string{"push", "origin", ":agent/t-1-old"}, "refs/heads/agent/t-1-old", "deleting refs is not allowed"},
		{"a bare agent/ prefix", []string{"push", "origin", "HEAD:refs/heads/agent/"}, "", ""},
		{"an agent branch with another", []string{"push", "--force", "origin", "HEAD:agent/t-1-new", "HEAD:main"}, "refs/heads/main", "only refs/heads/agent/* may be pushed"},
	}
	want := 0
	for _, tc := range refused {
		out, err := gitErr(clone, tc.args...)
		if err == nil {
			t.Fatalf("%s: push accepted:\n%s", tc.name, out)
		}
		if tc.ref != "" && (!strings.Contains(out, "remote: gitserve: refusing to update "+tc.ref+": "+tc.why) || !strings.Contains(out, "[remote rejected]")) {
			t.Errorf("%s: git printed no clear refusal:\n%s", tc.name, out)
		}
		if tc.ref == "" {
			continue // the git client refuses the ref name itself
		}
		want++
		if got := s.Refused(); got != want {
			t.Errorf("%s: refused pushes %d, want %d", tc.name, got, want)
		}
	}
	if got := git(t, repo, "rev-parse", "main"); got != mainBefore {
		t.Fatal("main moved")
	}
	if out, _ := gitErr(repo, "for-each-ref", "--format=%(refname)"); strings.TrimSpace(out) != "refs/heads/agent/t-1-old\nrefs/heads/main" {
		t.Fatalf("refs changed:\n%s", out)
	}

	// Creating and force-updating an agent branch goes through.
	git(t, clone, "push", "--quiet", "origin", "agent/t-1-new")
	git(t, clone, "push", "--quiet", "--force", "origin", "HEAD:agent/t-1-old")
	for _, b := range []string{"agent/t-1-new", "agent/t-1-old"} {
		if got := git(t, repo, "rev-parse", b); got != head {
			t.Errorf("%s = %s, want %s", b, got, head)
		}
	}
}
