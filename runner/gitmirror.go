package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The remote's default branch and branches, as the mirror holds them right
// after Clone. The mirror is the runner's own (the agent cannot write it),
// so they are read from its files, HEAD and packed-refs, where `git clone
// --bare` writes them: three `git` processes fewer at the start of every
// run. Where the layout is not that one (the reftable format, a loose
// ref), the mirror's git is asked.

// RemoteDefault is the remote's default branch (the mirror's HEAD).
func (g *Git) RemoteDefault(ctx context.Context) (string, error) {
	if head, _, ok := g.mirrorFiles(); ok {
		if name, ok := strings.CutPrefix(head, "ref: refs/heads/"); ok && name != "" {
			return name, nil
		}
	}
	out, err := g.Inspect(ctx, "symbolic-ref", "--short", "HEAD")
	return strings.TrimSpace(out), err
}

// RemoteBranch is the commit the remote's branch points at, or an error
// when the remote has no such branch.
func (g *Git) RemoteBranch(ctx context.Context, branch string) (string, error) {
	if _, packed, ok := g.mirrorFiles(); ok && checkBranchName(branch) == nil {
		if _, err := os.Lstat(filepath.Join(g.mirror, "refs", "heads", filepath.FromSlash(branch))); errors.Is(err, fs.ErrNotExist) {
			if sha, found := packedRef(packed, "refs/heads/"+branch); found {
				return sha, nil
			}
			return "", &GitError{Args: "rev-parse origin/" + branch, Err: errors.New("no such branch on the remote")}
		}
	}
	out, err := g.Inspect(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	return strings.TrimSpace(out), err
}

// mirrorFiles reads the mirror's HEAD and packed-refs; ok is false where
// they are not where refs live (reftable) or cannot be read.
func (g *Git) mirrorFiles() (head string, packed []byte, ok bool) {
	if _, err := os.Lstat(filepath.Join(g.mirror, "reftable")); !errors.Is(err, fs.ErrNotExist) {
		return "", nil, false
	}
	h, err := os.ReadFile(filepath.Join(g.mirror, "HEAD"))
	if err != nil {
		return "", nil, false
	}
	packed, err = os.ReadFile(filepath.Join(g.mirror, "packed-refs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, false
	}
	return strings.TrimSpace(string(h)), packed, true
}

// packedRef finds ref in a packed-refs file ("<sha> <ref>" lines, after a
// "# pack-refs" header, each annotated tag followed by its "^<sha>").
func packedRef(packed []byte, ref string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(packed))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		sha, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && fullSHA.MatchString(sha) {
			return sha, true
		}
	}
	return "", false
}
