package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Head reads HEAD from git once and again only when the files git keeps it
// in change: a commit, a branch switch, a reset or a ref rewritten in place
// by someone else (the agent) are each seen at the next call.
func TestHeadFollowsEveryMove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh("init", "--quiet", "-b", "main")
	sh("commit", "--quiet", "--allow-empty", "-m", "one")
	g := newGit(gitConf{dir: dir, env: os.Environ(), red: NewRedactor("")})
	ctx := context.Background()
	want := func(what, sha string) {
		t.Helper()
		got, err := g.Head(ctx)
		if err != nil || got != sha {
			t.Fatalf("%s: Head = %q, %v; want %s", what, got, err, sha)
		}
	}
	want("first read", sh("rev-parse", "HEAD"))
	if g.head.sha == "" {
		t.Fatal("HEAD of a plain checkout was not kept")
	}
	want("read again", sh("rev-parse", "HEAD"))

	sh("commit", "--quiet", "--allow-empty", "-m", "two")
	want("after a commit", sh("rev-parse", "HEAD"))
	sh("checkout", "--quiet", "-b", "other", "HEAD~1")
	want("after a branch switch", sh("rev-parse", "HEAD"))
	sh("reset", "--quiet", "--hard", "main")
	want("after a reset", sh("rev-parse", "HEAD"))

	// The ref written in place, same inode and size: its change time moves.
	first := sh("rev-parse", "main~1")
	if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "other"), []byte(first+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("after the ref was rewritten in place", first)

	// Packed, the loose ref gone: read from packed-refs.
	sh("pack-refs", "--all")
	want("after pack-refs", first)
	sh("update-ref", "refs/heads/other", "main")
	want("after update-ref", sh("rev-parse", "main"))
}

// Where the layout is not the plain one, Head asks git every time.
func TestHeadIsNotKeptForOtherLayouts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newGit(gitConf{dir: dir})
	if _, ok := g.headStamp(); ok {
		t.Error("a .git file was stamped")
	}
	if err := os.Remove(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".git/reftable", ".git/refs/heads"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.headStamp(); ok {
		t.Error("a reftable repository was stamped")
	}
	if err := os.Remove(filepath.Join(dir, ".git", "reftable")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, ".git", "refs", "heads", "main")); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.headStamp(); ok {
		t.Error("a ref that is a symbolic link was stamped")
	}
}
