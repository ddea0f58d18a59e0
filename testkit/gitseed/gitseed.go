// Package gitseed writes a commit straight into a git repository (a root
// commit as loose objects, any other with one `git fast-import`), for
// test fixtures that seed many repositories: the
// usual init, add, commit and push of a work tree costs five or more git
// processes per commit, which on a busy machine was most of a test's set-up.
package gitseed

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// InitBare creates an empty bare repository at gitDir whose HEAD names
// branch: the files `git init --bare` would write that git needs, written
// without starting a process (the tests seed hundreds of repositories, and
// on these machines every git process costs ~15 ms of CPU). extraConfig is
// appended to its config file as it is (git config syntax), or "".
func InitBare(gitDir, branch, extraConfig string) error {
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return fmt.Errorf("init bare repository %s: %w", gitDir, err)
		}
	}
	files := map[string]string{
		"HEAD": "ref: refs/heads/" + branch + "\n",
		// No `git gc --auto` after each push: it is a process per push that
		// the tests' GitHub and remotes never need (GitHub's own
		// housekeeping is not the client's to wait for).
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n[receive]\n\tautogc = false\n" + extraConfig,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("init bare repository %s: %w", gitDir, err)
		}
	}
	return nil
}

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
	if sha, ok, err := writeRoot(gitDir, c); ok {
		if err != nil {
			return "", fmt.Errorf("write commit on %s into %s: %w", c.Branch, gitDir, err)
		}
		return sha, nil
	}
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
	// unpackLimit 0 keeps the one small pack fast-import wrote, instead of
	// a second process exploding it into loose objects.
	cmd := exec.Command("git", "-c", "fastimport.unpackLimit=0", "--git-dir", gitDir, "fast-import", "--quiet")
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
