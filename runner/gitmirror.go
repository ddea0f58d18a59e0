package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The remote's default branch and branches, as the mirror holds them right
// after Clone. The mirror is the runner's own (the agent cannot write it),
// so they are read from its files, HEAD and packed-refs, where `git clone
// --bare` writes them: three `git` processes fewer at the start of every
// run. Where the layout is not that one (the reftable format, a loose
// ref), the mirror's git is asked.

// gitMirror is the runner's bare mirror (dir), read from the runner's
// side: the remote's branches as the clone left them, and the agent's
// commits, whose objects are read as data from the checkout (objects) and
// nothing else of it (see inspectEnv).
type gitMirror struct {
	dir     string
	env     []string // the runner's
	objects string   // the checkout's .git/objects
	red     *Redactor
}

// RemoteDefault is the remote's default branch (the mirror's HEAD).
func (m *gitMirror) RemoteDefault(ctx context.Context) (string, error) {
	if head, _, ok := m.mirrorFiles(); ok {
		if name, ok := strings.CutPrefix(head, "ref: refs/heads/"); ok && name != "" {
			return name, nil
		}
	}
	out, err := m.Inspect(ctx, "symbolic-ref", "--short", "HEAD")
	return strings.TrimSpace(out), err
}

// RemoteBranch is the commit the remote's branch points at, or an error
// when the remote has no such branch.
func (m *gitMirror) RemoteBranch(ctx context.Context, branch string) (string, error) {
	if _, packed, ok := m.mirrorFiles(); ok && checkBranchName(branch) == nil {
		if _, err := os.Lstat(filepath.Join(m.dir, "refs", "heads", filepath.FromSlash(branch))); errors.Is(err, fs.ErrNotExist) {
			if sha, found := packedRef(packed, "refs/heads/"+branch); found {
				return sha, nil
			}
			return "", &GitError{Args: "rev-parse origin/" + branch, Err: errors.New("no such branch on the remote")}
		}
	}
	out, err := m.Inspect(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	return strings.TrimSpace(out), err
}

// mirrorFiles reads the mirror's HEAD and packed-refs; ok is false where
// they are not where refs live (reftable) or cannot be read.
func (m *gitMirror) mirrorFiles() (head string, packed []byte, ok bool) {
	if _, err := os.Lstat(filepath.Join(m.dir, "reftable")); !errors.Is(err, fs.ErrNotExist) {
		return "", nil, false
	}
	h, err := os.ReadFile(filepath.Join(m.dir, "HEAD"))
	if err != nil {
		return "", nil, false
	}
	packed, err = os.ReadFile(filepath.Join(m.dir, "packed-refs"))
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

// inspectEnv is the environment of git reading the agent's commits from
// the runner's side: the runner's own configuration, the mirror's refs and
// the checkout's objects as plain data, so nothing the agent wrote in its
// .git (config, attributes, hooks, replace refs) is read.
func (m *gitMirror) inspectEnv() []string {
	return append(append([]string(nil), m.env...), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+m.objects, "GIT_NO_REPLACE_OBJECTS=1")
}

// Inspect runs a read-only git command on the agent's commits from the
// runner's side (see inspectEnv) and returns its output.
func (m *gitMirror) Inspect(ctx context.Context, args ...string) (string, error) {
	return execGit(ctx, m.red, filepath.Dir(m.dir), m.inspectEnv(), nil, nil, append([]string{"--git-dir=" + m.dir}, args...)...)
}

// InspectStream is Inspect with the output read by read as git writes it.
func (m *gitMirror) InspectStream(ctx context.Context, read func(io.Reader) error, args ...string) error {
	return m.InspectStreamIn(ctx, nil, read, args...)
}

// InspectStreamIn is InspectStream with stdin as git's input.
func (m *gitMirror) InspectStreamIn(ctx context.Context, stdin io.Reader, read func(io.Reader) error, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + m.dir}, args...)...)
	cmd.Dir = filepath.Dir(m.dir)
	cmd.Env = m.inspectEnv()
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
		return &GitError{Args: m.red.String(strings.Join(args, " ")), Output: m.red.String(tail(strings.TrimSpace(stderr.String()), 2000)), Err: err}
	}
	return rerr
}

// Blobs reads the blob at each "<rev>:<path>" from the mirror with one
// `git cat-file --batch`, where each `cat-file blob` would be a process;
// a blob that does not exist is nil. A spec with a newline in it (a path
// the agent named) is read on its own, as the batch input is one spec a
// line.
func (m *gitMirror) Blobs(ctx context.Context, specs ...string) ([][]byte, error) {
	out := make([][]byte, len(specs))
	var in strings.Builder
	var batched []int
	for i, s := range specs {
		if strings.ContainsAny(s, "\n\r") {
			if text, err := m.Inspect(ctx, "cat-file", "blob", s); err == nil {
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
	err := m.InspectStreamIn(ctx, strings.NewReader(in.String()), func(r io.Reader) error {
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
