package gitserve

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func withAuth(raw, user, pass string) string {
	u, _ := url.Parse(raw)
	u.User = url.UserPassword(user, pass)
	return u.String()
}

// A working tree is cloned and pushed to over HTTP with the token; the
// pushed branch lands in the working tree's repository, and the checked
// out branch is left alone.
func TestCloneAndPushWorkingTree(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(t.TempDir(), "my calc")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "--quiet")
	os.WriteFile(filepath.Join(repo, "add.sh"), []byte("echo $(( $1 + $2 ))\n"), 0o644)
	git(t, repo, "add", "add.sh")
	git(t, repo, "commit", "--quiet", "-m", "add")

	s, err := Start(Options{Repo: repo, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasSuffix(s.URL, "/my-calc.git") || len(s.Token) != 64 {
		t.Fatalf("URL %q, token of %d chars", s.URL, len(s.Token))
	}

	work := t.TempDir()
	if out, err := gitErr(work, "clone", "--quiet", withAuth(s.URL, "x-access-token", "wrong"), "nope"); err == nil {
		t.Fatalf("clone with a wrong token succeeded:\n%s", out)
	}
	git(t, work, "clone", "--quiet", withAuth(s.URL, "x-access-token", s.Token), "clone")
	clone := filepath.Join(work, "clone")
	git(t, clone, "checkout", "--quiet", "-b", "agent/t-1-notes")
	os.WriteFile(filepath.Join(clone, "NOTES.md"), []byte("notes\n"), 0o644)
	git(t, clone, "add", "NOTES.md")
	git(t, clone, "commit", "--quiet", "-m", "notes")
	git(t, clone, "push", "--quiet", "origin", "agent/t-1-notes")

	if got := git(t, repo, "show", "agent/t-1-notes:NOTES.md"); got != "notes" {
		t.Fatalf("pushed NOTES.md = %q", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "NOTES.md")); !os.IsNotExist(err) {
		t.Fatal("the push touched the working tree")
	}
	rejected, pushes := s.Counts()
	if rejected < 1 || pushes != 1 {
		t.Fatalf("rejected %d, pushes %d", rejected, pushes)
	}
	// Only the one repository is served.
	if out, err := gitErr(work, "ls-remote", withAuth(strings.TrimSuffix(s.URL, "/my-calc.git")+"/other.git", "x", s.Token)); err == nil {
		t.Fatalf("another path was served:\n%s", out)
	}
}

func TestBareRepositoryAndClose(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	git(t, src, "init", "--quiet")
	git(t, src, "commit", "--quiet", "--allow-empty", "-m", "first")
	bare := filepath.Join(t.TempDir(), "shop.git")
	git(t, src, "clone", "--quiet", "--bare", src, bare)

	s, err := Start(Options{Repo: bare, Listen: "127.0.0.1:0", Host: "host.example", Token: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL, "http://host.example:") || !strings.HasSuffix(s.URL, "/shop.git") {
		t.Fatalf("URL = %q", s.URL)
	}
	local := "http://" + s.Addr() + "/shop.git"
	out := git(t, src, "ls-remote", withAuth(local, "x", "fixed"), "refs/heads/main")
	if !strings.HasSuffix(out, "refs/heads/main") {
		t.Fatalf("ls-remote = %q", out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := gitErr(src, "ls-remote", withAuth(local, "x", "fixed")); err == nil {
		t.Fatal("served after Close")
	}
}

func TestNotARepository(t *testing.T) {
	t.Parallel()
	_, err := Start(Options{Repo: t.TempDir(), Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "is not a git repository") {
		t.Fatalf("err = %v", err)
	}
}
