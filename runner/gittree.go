package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gitTree is the agent's checkout, its work tree and commits: every git
// command here runs in it as the agent (see Git), with the agent's
// environment. It keeps HEAD as last read (githead.go).
type gitTree struct {
	Dir string
	// env is the environment of git on the agent's side; shared is the
	// part the agent and the checks get as well.
	env    []string
	shared []string
	agent  *AgentUser
	red    *Redactor
	head   headCache
}

// Env is the environment the agent and checks get for git: the identity,
// but not the credential helper (the agent does not push).
func (t *gitTree) Env() []string { return t.shared }

// run runs git in dir (t.Dir when empty) as the agent and returns trimmed
// stdout. The error carries git's stderr, redacted.
func (t *gitTree) run(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := t.raw(ctx, dir, args...)
	return strings.TrimSpace(out), err
}

// raw is run without trimming (porcelain output starts with a space).
func (t *gitTree) raw(ctx context.Context, dir string, args ...string) (string, error) {
	if dir == "" {
		dir = t.Dir
	}
	return execGit(ctx, t.red, dir, t.env, t.agent, nil, args...)
}

// Checkout makes branch point at start and checks it out.
func (t *gitTree) Checkout(ctx context.Context, branch, start string) error {
	_, err := t.run(ctx, "", "checkout", "--quiet", "-B", branch, start)
	return err
}

// RevParse resolves a revision to a sha.
func (t *gitTree) RevParse(ctx context.Context, rev string) (string, error) {
	return t.run(ctx, "", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
}

// Dirty lists changed and untracked (not ignored) paths.
func (t *gitTree) Dirty(ctx context.Context) ([]string, error) {
	out, err := t.raw(ctx, "", "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if len(l) > 3 {
			paths = append(paths, l[3:])
		}
	}
	return paths, nil
}

// CommitAll stages everything and commits it; it returns the new sha, or ""
// when there was nothing to commit. Hooks are skipped: a repository's
// pre-commit hook must not decide whether the agent's work is saved.
func (t *gitTree) CommitAll(ctx context.Context, msg string) (string, error) {
	dirty, err := t.Dirty(ctx)
	if err != nil || len(dirty) == 0 {
		return "", err
	}
	if _, err := t.run(ctx, "", "add", "--all"); err != nil {
		return "", err
	}
	if _, err := t.run(ctx, "", "commit", "--quiet", "--no-verify", "--allow-empty-message", "-m", msg); err != nil {
		return "", err
	}
	return t.Head(ctx)
}

// CommitPaths commits only paths (the media commit must not sweep up
// anything else); "" when they hold no change.
func (t *gitTree) CommitPaths(ctx context.Context, msg string, paths ...string) (string, error) {
	if _, err := t.run(ctx, "", append([]string{"add", "--all", "--"}, paths...)...); err != nil {
		return "", err
	}
	if _, err := t.run(ctx, "", "diff", "--cached", "--quiet"); err == nil {
		return "", nil
	}
	if _, err := t.run(ctx, "", "commit", "--quiet", "--no-verify", "-m", msg); err != nil {
		return "", err
	}
	return t.Head(ctx)
}

// Untracked lists untracked, not ignored files.
func (t *gitTree) Untracked(ctx context.Context) ([]string, error) {
	out, err := t.raw(ctx, "", "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Conflicts lists unmerged paths.
func (t *gitTree) Conflicts(ctx context.Context) ([]string, error) {
	out, err := t.run(ctx, "", "diff", "--name-only", "--diff-filter=U")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// RebaseInProgress reports whether a rebase stopped midway.
func (t *gitTree) RebaseInProgress() bool {
	for _, d := range []string{"rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(filepath.Join(t.Dir, ".git", d)); err == nil {
			return true
		}
	}
	return false
}

// Exclude adds gitignore patterns to .git/info/exclude, for files the
// sandbox itself makes in the checkout (.env with resolved secrets, check
// byproducts) that must never be committed, without touching the
// repository's .gitignore.
func (t *gitTree) Exclude(patterns ...string) error {
	p := filepath.Join(t.Dir, ".git", "info", "exclude")
	text := strings.Join(patterns, "\n") + "\n"
	if t.agent != nil {
		// The checkout is the agent's: the runner cannot write in it.
		cmd := exec.Command("sh", "-c", `mkdir -p "$(dirname "$0")" && cat >> "$0"`, p)
		cmd.Env = t.env
		t.agent.apply(cmd)
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("append to %s as %s: %w: %s", p, t.agent.Name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(text)
	return err
}
