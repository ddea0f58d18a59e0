package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// headCache is the checkout's HEAD as the runner last read it, with the
// stamp of the files git kept it in at that moment. A run asks for HEAD
// about eight times (after its commits, before each push, for the checks,
// the review and the receipt) and each `git rev-parse` is a process: it is
// asked again only when one of those files changed since.
//
// Nothing depends on HEAD being fresher than that: every push, scan and
// receipt names a commit by its sha, so a HEAD read a moment early is a
// commit the runner scans and pushes as it is. The stamp holds each
// file's inode, size and change time: git writes refs through a lock file
// renamed into place (a new inode), and a process cannot set a file's
// change time back.
type headCache struct {
	mu    sync.Mutex
	sha   string
	stamp string
}

// Head is the checkout's HEAD commit.
func (t *gitTree) Head(ctx context.Context) (string, error) {
	t.head.mu.Lock()
	defer t.head.mu.Unlock()
	before, stable := t.headStamp()
	if stable && t.head.sha != "" && before == t.head.stamp {
		return t.head.sha, nil
	}
	sha, err := t.RevParse(ctx, "HEAD")
	t.head.sha, t.head.stamp = "", ""
	if err != nil {
		return "", err
	}
	// Kept only when nothing moved while git read it.
	if after, ok := t.headStamp(); stable && ok && after == before {
		t.head.sha, t.head.stamp = sha, before
	}
	return sha, nil
}

// knowHead records sha as HEAD, as a command the runner ran has just set
// it (checkout -B), with the stamp of the files as they are now: the next
// Head returns it while they stay so.
func (t *gitTree) knowHead(sha string) {
	t.head.mu.Lock()
	defer t.head.mu.Unlock()
	t.head.sha, t.head.stamp = "", ""
	if stamp, ok := t.headStamp(); ok && fullSHA.MatchString(sha) {
		t.head.sha, t.head.stamp = sha, stamp
	}
}

// headStamp describes the files HEAD is read from: .git/HEAD, the branch
// it names, packed-refs. ok is false where the layout is not the plain
// one whose files say every change (a .git file or link, a worktree, the
// reftable format, a symbolic link among the refs, a file the runner
// cannot read), and then HEAD is read from git every time.
func (t *gitTree) headStamp() (string, bool) {
	gitDir := filepath.Join(t.Dir, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return "", false
	}
	for _, other := range []string{"commondir", "reftable"} {
		if _, err := os.Lstat(filepath.Join(gitDir, other)); !os.IsNotExist(err) {
			return "", false
		}
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", false
	}
	files := []string{"HEAD", "packed-refs"}
	if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: "); ok {
		if !strings.HasPrefix(ref, "refs/heads/") || strings.Contains(ref, "..") {
			return "", false
		}
		files = append(files, ref)
	}
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(gitDir, f))
		if os.IsNotExist(err) {
			b.WriteString("-|")
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if err != nil || !ok || !fi.Mode().IsRegular() {
			return "", false
		}
		b.WriteString(stampOf(st))
	}
	return b.String(), true
}

func stampOf(st *syscall.Stat_t) string {
	return fmt.Sprintf("%d,%d,%d,%d.%d,%d.%d|", st.Dev, st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec, st.Mtim.Sec, st.Mtim.Nsec)
}
