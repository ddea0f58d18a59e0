package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// credentialArgs make the credential helper the only one git asks (an
// empty value resets those of other config files).
func (g *Git) credentialArgs() []string {
	args := []string{"-c", "credential.helper="}
	if g.helper != "" {
		g.red.Refresh()
		args = append(args, "-c", "credential.helper="+g.helper)
	}
	return args
}

// net runs a git command that talks to the remote: as the runner, in the
// mirror, with the credential helper.
func (g *Git) net(ctx context.Context, extraEnv []string, args ...string) (string, error) {
	pre := append([]string{"--git-dir=" + g.mirror}, g.credentialArgs()...)
	out, err := g.exec(ctx, filepath.Dir(g.mirror), append(append([]string(nil), g.netEnv...), extraEnv...), nil, nil, append(pre, args...)...)
	return strings.TrimSpace(out), err
}

// Clone clones url into the runner's mirror, then the mirror into the
// agent's checkout g.Dir (an empty directory the agent owns).
func (g *Git) Clone(ctx context.Context, url string) error {
	if err := os.RemoveAll(g.mirror); err != nil {
		return fmt.Errorf("clone: remove the old mirror: %w", err)
	}
	cmd := append(g.credentialArgs(), "clone", "--bare", "--quiet", "--no-tags", url, g.mirror)
	if _, err := g.exec(ctx, filepath.Dir(g.mirror), g.netEnv, nil, nil, cmd...); err != nil {
		return fmt.Errorf("clone %s: %w", redactURL(url), err)
	}
	if _, err := g.run(ctx, g.Dir, "clone", "--quiet", "--no-tags", g.mirror, "."); err != nil {
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
func (g *Git) Push(ctx context.Context, sha, branch, lease string) error {
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
	_, err := g.net(ctx, []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(g.Dir, ".git", "objects")}, args...)
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

// inspectEnv is the environment of git reading the agent's commits from
// the runner's side: the runner's own configuration, the mirror's refs and
// the checkout's objects as plain data, so nothing the agent wrote in its
// .git (config, attributes, hooks, replace refs) is read.
func (g *Git) inspectEnv() []string {
	return append(append([]string(nil), g.netEnv...), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(g.Dir, ".git", "objects"), "GIT_NO_REPLACE_OBJECTS=1")
}

// Inspect runs a read-only git command on the agent's commits from the
// runner's side (see inspectEnv) and returns its output.
func (g *Git) Inspect(ctx context.Context, args ...string) (string, error) {
	return g.exec(ctx, filepath.Dir(g.mirror), g.inspectEnv(), nil, nil, append([]string{"--git-dir=" + g.mirror}, args...)...)
}

// InspectStream is Inspect with the output read by read as git writes it.
func (g *Git) InspectStream(ctx context.Context, read func(io.Reader) error, args ...string) error {
	return g.InspectStreamIn(ctx, nil, read, args...)
}

// InspectStreamIn is InspectStream with stdin as git's input.
func (g *Git) InspectStreamIn(ctx context.Context, stdin io.Reader, read func(io.Reader) error, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + g.mirror}, args...)...)
	cmd.Dir = filepath.Dir(g.mirror)
	cmd.Env = g.inspectEnv()
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git %s: %w", args[0], err)
	}
	rerr := read(out)
	// Whatever read left unread is drained, so git is not stuck on a
	// full pipe.
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return &GitError{Args: g.red.String(strings.Join(args, " ")), Output: g.red.String(tail(strings.TrimSpace(stderr.String()), 2000)), Err: err}
	}
	return rerr
}

// Blobs reads the blob at each "<rev>:<path>" from the mirror with one
// `git cat-file --batch`, where each `cat-file blob` would be a process;
// a blob that does not exist is nil. A spec with a newline in it (a path
// the agent named) is read on its own, as the batch input is one spec a
// line.
func (g *Git) Blobs(ctx context.Context, specs ...string) ([][]byte, error) {
	out := make([][]byte, len(specs))
	var in strings.Builder
	var batched []int
	for i, s := range specs {
		if strings.ContainsAny(s, "\n\r") {
			if text, err := g.Inspect(ctx, "cat-file", "blob", s); err == nil {
				out[i] = []byte(text)
			}
			continue
		}
		in.WriteString(s + "\n")
		batched = append(batched, i)
	}
	if len(batched) == 0 {
		return out, nil
	}
	err := g.InspectStreamIn(ctx, strings.NewReader(in.String()), func(r io.Reader) error {
		br := bufio.NewReader(r)
		for _, i := range batched {
			header, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("cat-file --batch: %w", err)
			}
			// "<sha> <type> <size>", or "<spec> missing" (or ambiguous),
			// where the spec may hold spaces.
			line := strings.TrimSuffix(header, "\n")
			if strings.HasSuffix(line, " missing") || strings.HasSuffix(line, " ambiguous") {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 || !fullSHA.MatchString(f[0]) {
				return fmt.Errorf("cat-file --batch: header %q", line)
			}
			size, err := strconv.Atoi(f[2])
			if err != nil {
				return fmt.Errorf("cat-file --batch: header %q", strings.TrimSpace(header))
			}
			body := make([]byte, size+1) // the content and its newline
			if _, err := io.ReadFull(br, body); err != nil {
				return fmt.Errorf("cat-file --batch: %w", err)
			}
			if f[1] == "blob" {
				out[i] = body[:size]
			}
		}
		return nil
	}, "cat-file", "--batch")
	return out, err
}
