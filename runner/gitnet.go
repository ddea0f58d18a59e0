package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// gitRemote is the network: clone, fetch and push run in the runner's
// mirror, as the runner, with the credential helper (see Git). What it
// fetches goes on into the agent's checkout (tree) as the agent.
type gitRemote struct {
	mirror string
	env    []string // the runner's
	helper string   // the credential helper script; "" without a token
	tree   *gitTree
	red    *Redactor
}

// credentialArgs make the credential helper the only one git asks (an
// empty value resets those of other config files).
func (r *gitRemote) credentialArgs() []string {
	args := []string{"-c", "credential.helper="}
	if r.helper != "" {
		r.red.Refresh()
		args = append(args, "-c", "credential.helper="+r.helper)
	}
	return args
}

// net runs a git command that talks to the remote: as the runner, in the
// mirror, with the credential helper.
func (r *gitRemote) net(ctx context.Context, extraEnv []string, args ...string) (string, error) {
	pre := append([]string{"--git-dir=" + r.mirror}, r.credentialArgs()...)
	out, err := execGit(ctx, r.red, filepath.Dir(r.mirror), append(append([]string(nil), r.env...), extraEnv...), nil, nil, append(pre, args...)...)
	return strings.TrimSpace(out), err
}

// Clone clones url into the runner's mirror, then the mirror into the
// agent's checkout tree.Dir (an empty directory the agent owns).
func (r *gitRemote) Clone(ctx context.Context, url string) error {
	if err := os.RemoveAll(r.mirror); err != nil {
		return fmt.Errorf("clone: remove the old mirror: %w", err)
	}
	cmd := append(r.credentialArgs(), "clone", "--bare", "--quiet", "--no-tags", url, r.mirror)
	if _, err := execGit(ctx, r.red, filepath.Dir(r.mirror), r.env, nil, nil, cmd...); err != nil {
		return fmt.Errorf("clone %s: %w", redactURL(url), err)
	}
	if _, err := r.tree.run(ctx, r.tree.Dir, "clone", "--quiet", "--no-tags", r.mirror, "."); err != nil {
		return fmt.Errorf("clone the mirror into the checkout: %w", err)
	}
	return nil
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// Push pushes the agent's commit sha to refs/heads/<branch> and nothing
// else: no tags, no other ref, one explicit refspec. With lease set, it
// force-pushes only if the remote branch is still at lease (a rebase must
// not overwrite someone's push that came in meanwhile); without one, only
// a fast-forward is accepted.
func (r *gitRemote) Push(ctx context.Context, sha, branch, lease string) error {
	if !fullSHA.MatchString(sha) {
		return fmt.Errorf("push: %q is not a commit id", sha)
	}
	if lease != "" && !fullSHA.MatchString(lease) {
		return fmt.Errorf("push: lease %q is not a commit id", lease)
	}
	if err := checkBranchName(branch); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	args := []string{"push", "--quiet", "--no-verify", "--no-follow-tags"}
	if lease != "" {
		args = append(args, "--force-with-lease=refs/heads/"+branch+":"+lease)
	}
	args = append(args, "origin", sha+":refs/heads/"+branch)
	// The agent's objects, read as data from its checkout.
	_, err := r.net(ctx, []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(r.tree.Dir, ".git", "objects")}, args...)
	return err
}

var branchName = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// checkBranchName refuses a name a refspec could read as something else
// (a force "+", a "src:dst" pair, an option, a full ref) or git would not
// take as a branch.
func checkBranchName(b string) error {
	if b == "" || !branchName.MatchString(b) || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "refs/") ||
		strings.Contains(b, "..") || strings.Contains(b, "//") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, ".") {
		return fmt.Errorf("%q is not a branch name the runner pushes to", b)
	}
	return nil
}
