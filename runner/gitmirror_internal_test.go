package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The remote's default branch and branches are read from the mirror's
// files as git would answer: packed by clone, loose when a fetch wrote
// one, absent when the remote has no such branch; and Blobs reads many
// blobs in one batch as `cat-file blob` reads each, missing ones nil.
func TestMirrorRefsAndBlobsAsGitReadsThem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := filepath.Join(root, "src")
	git(root, "init", "--quiet", "-b", "trunk", src)
	os.WriteFile(filepath.Join(src, ".gitleaksignore"), []byte("a:b:1\n\nbinary\x00\n"), 0o644)
	git(src, "add", ".")
	git(src, "commit", "--quiet", "-m", "one")
	git(src, "branch", "agent/x")
	mirror := filepath.Join(root, "state", "mirror.git")
	git(root, "clone", "--bare", "--quiet", "--no-tags", src, mirror)
	dir := filepath.Join(root, "repo")
	os.Mkdir(dir, 0o755)
	git(dir, "clone", "--quiet", "--no-tags", mirror, ".")
	g := newGit(gitConf{dir: dir, mirror: mirror, env: env, netEnv: env, red: NewRedactor("")})
	ctx := context.Background()

	if def, err := g.RemoteDefault(ctx); err != nil || def != "trunk" {
		t.Errorf("RemoteDefault = %q, %v; git says %s", def, err, git(dir, "symbolic-ref", "--short", "HEAD"))
	}
	for _, b := range []string{"trunk", "agent/x"} {
		if sha, err := g.RemoteBranch(ctx, b); err != nil || sha != git(dir, "rev-parse", "origin/"+b) {
			t.Errorf("RemoteBranch(%s) = %q, %v", b, sha, err)
		}
	}
	if sha, err := g.RemoteBranch(ctx, "nope"); err == nil {
		t.Errorf("RemoteBranch(nope) = %q, want an error", sha)
	}
	// A loose ref in the mirror is git's to read.
	git(src, "commit", "--quiet", "--allow-empty", "-m", "two")
	git(mirror, "fetch", "--quiet", src, "trunk:trunk")
	if sha, err := g.RemoteBranch(ctx, "trunk"); err != nil || sha != git(mirror, "rev-parse", "trunk") {
		t.Errorf("RemoteBranch(trunk) after a loose update = %q, %v", sha, err)
	}

	base := git(dir, "rev-parse", "origin/trunk")
	blobs, err := g.Blobs(ctx, base+":.gitleaksignore", base+":missing", "nope:x", base+":a\nb", base+":a b", base+":with two spaces")
	if err != nil {
		t.Fatal(err)
	}
	if string(blobs[0]) != "a:b:1\n\nbinary\x00\n" || blobs[1] != nil || blobs[2] != nil || blobs[3] != nil || blobs[4] != nil || blobs[5] != nil {
		t.Errorf("Blobs = %q", blobs)
	}

	// HEAD as a checkout left it is HEAD until something moves it.
	git(dir, "checkout", "--quiet", "-B", "work", "origin/agent/x")
	g.knowHead(git(dir, "rev-parse", "HEAD"))
	if g.head.sha == "" {
		t.Fatal("knowHead kept nothing for a plain checkout")
	}
	git(dir, "commit", "--quiet", "--allow-empty", "-m", "three")
	if got, err := g.Head(ctx); err != nil || got != git(dir, "rev-parse", "HEAD") {
		t.Errorf("Head after a commit = %q, %v", got, err)
	}
}
