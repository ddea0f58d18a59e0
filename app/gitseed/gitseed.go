// Package gitseed writes a commit straight into a git repository with one
// `git fast-import`, for test fixtures that seed many repositories: the
// usual init, add, commit and push of a work tree costs five or more git
// processes per commit, which on a busy machine was most of a test's set-up.
package gitseed

import (
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Commit is one commit to write.
type Commit struct {
	// Branch is the branch the commit goes on (created or moved forward).
	Branch string
	// Parent is the parent commit (a sha or a ref); empty makes a root commit.
	Parent string
	// Committer is "Name <email>"; it is also the author.
	Committer string
	// Mode is the file mode of every written file: "100644" or "100755".
	Mode string
	// Files are written on top of Parent's tree; an empty content deletes.
	Files   map[string]string
	Message string
}

// Write writes c into the repository at gitDir (bare or not; a checked-out
// branch's work tree is left as it is) and returns the new commit's sha.
// env is the environment git runs with (nil: the process's).
func Write(gitDir string, env []string, c Commit) (string, error) {
	var in bytes.Buffer
	fmt.Fprintf(&in, "commit refs/heads/%s\nmark :1\n", c.Branch)
	fmt.Fprintf(&in, "committer %s %d +0000\n", c.Committer, time.Now().Unix())
	fmt.Fprintf(&in, "data %d\n%s\n\n", len(c.Message)+1, c.Message)
	if c.Parent != "" {
		fmt.Fprintf(&in, "from %s\n", c.Parent)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Files)) {
		if c.Files[name] == "" {
			fmt.Fprintf(&in, "D %s\n", name)
			continue
		}
		fmt.Fprintf(&in, "M %s inline %s\ndata %d\n%s\n", c.Mode, name, len(c.Files[name]), c.Files[name])
	}
	// get-mark prints the commit's sha on stdout once it is written.
	in.WriteString("get-mark :1\n")
	cmd := exec.Command("git", "--git-dir", gitDir, "fast-import", "--quiet")
	cmd.Env = env
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git fast-import into %s (commit on %s): %w: %s", gitDir, c.Branch, err, strings.TrimSpace(stderr.String()))
	}
	sha := strings.TrimSpace(stdout.String())
	if len(sha) < 40 {
		return "", fmt.Errorf("git fast-import into %s (commit on %s): no commit sha in its output %q", gitDir, c.Branch, sha)
	}
	return sha, nil
}
