// Package runtest holds fixtures for tests of the runner and of what drives
// it (the process backend, the CLI): real git remotes (bare repositories
// over file:// and over HTTP through git http-backend with token auth) and
// a hermetic environment for the real OpenCode CLI.
package runtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/gitseed"
)

// Remote is a bare repository standing in for GitHub.
type Remote struct {
	// Dir is the bare repository; URL is file://Dir.
	Dir string
	URL string
}

// gitEnv keeps the fixture's git independent of the machine's config.
func gitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test Maintainer", "GIT_AUTHOR_EMAIL=maintainer@example.com",
		"GIT_COMMITTER_NAME=Test Maintainer", "GIT_COMMITTER_EMAIL=maintainer@example.com",
	)
}

// Git runs git in dir and returns trimmed stdout, failing t on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// GitErr is Git returning the error (with stderr) instead of failing.
func GitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &gitErr{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type gitErr struct {
	err    error
	stderr string
}

func (e *gitErr) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// NewRemote creates a bare repository whose main branch has one commit with
// files.
func NewRemote(t testing.TB, files map[string]string) *Remote {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "origin.git")
	if err := gitseed.InitBare(bare, "main", ""); err != nil {
		t.Fatal(err)
	}
	r := &Remote{Dir: bare, URL: "file://" + bare}
	r.seed(t, "main", "", files, "Initial commit")
	return r
}

// Commit writes files (an empty content deletes the file) on branch,
// starting from `from` when the branch does not exist yet, and pushes it.
// It returns the new commit's sha.
//
// The commit is written straight into the bare repository (gitseed), not
// cloned, committed and pushed: tests seed many remotes.
func (r *Remote) Commit(t testing.TB, branch, from string, files map[string]string, msg string) string {
	t.Helper()
	parent := r.SHA(t, "refs/heads/"+branch)
	if parent == "" && from != "" {
		if parent = r.SHA(t, "refs/heads/"+from); parent == "" {
			t.Fatalf("commit on %s: branch %s to start from does not exist in %s", branch, from, r.Dir)
		}
	}
	return r.seed(t, branch, parent, files, msg)
}

// seed writes one commit on branch with the given parent ("" for a root).
func (r *Remote) seed(t testing.TB, branch, parent string, files map[string]string, msg string) string {
	t.Helper()
	sha, err := gitseed.Write(r.Dir, gitEnv(), gitseed.Commit{
		Branch: branch, Parent: parent, Committer: "Test Maintainer <maintainer@example.com>",
		Mode: "100755", Files: files, Message: msg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// SHA returns the sha ref points at, or "" if it does not exist.
func (r *Remote) SHA(t testing.TB, ref string) string {
	t.Helper()
	out, err := GitErr(r.Dir, "rev-parse", "--verify", "--quiet", ref)
	if err != nil {
		return ""
	}
	return out
}

// File returns path's content at ref.
func (r *Remote) File(t testing.TB, ref, path string) (string, bool) {
	t.Helper()
	out, err := GitErr(r.Dir, "show", ref+":"+path)
	if err != nil {
		return "", false
	}
	return out, true
}

// Subjects lists the commit subjects of from..to, newest first.
func (r *Remote) Subjects(t testing.TB, rng string) []string {
	t.Helper()
	out := Git(t, r.Dir, "log", "--format=%s", rng)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// OpenCodeEnv is a hermetic environment for the real OpenCode CLI talking
// to srv: its own HOME and XDG directories (sessions and caches never touch
// the developer's), OPENCODE_CONFIG pointing at srv's provider.
func OpenCodeEnv(t testing.TB, srv *modeltest.Server) []string {
	t.Helper()
	home := t.TempDir()
	cfg, err := srv.WriteOpenCodeConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return append(HermeticEnv(home), "OPENCODE_CONFIG="+cfg)
}

// HermeticEnv is os.Environ with HOME and the XDG directories under home
// and no git configuration from the machine.
func HermeticEnv(home string) []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case k == "HOME", strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "OPENCODE_"), strings.HasPrefix(k, "GIT_"), strings.HasPrefix(k, "SANDBOX_"):
			continue
		}
		env = append(env, e)
	}
	return append(env,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"GIT_CONFIG_GLOBAL=/dev/null",
	)
}

// TimedRun runs cmd (an agent CLI started directly, a benchmark's floor)
// and returns how long it took; it fails the benchmark with the output
// when the command fails.
func TimedRun(tb testing.TB, what string, cmd *exec.Cmd) time.Duration {
	tb.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s: %v\n%s", what, err, out.String())
	}
	return time.Since(start)
}
