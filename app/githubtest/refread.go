package githubtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/testkit/gitseed"
)

// The fake answers many requests for a branch's head and for a file at a
// ref (every start reads .sandbox.yml, every PR read its head): each a git
// process. A branch is read here from the bare repository's own files, as
// git reads it (a loose ref, else packed-refs), and a file at a commit,
// which never changes, is read once per server.

// readRef is the sha the full ref name points at. ok is false where the
// files do not say it plainly (a symbolic ref, a name git would not take),
// and the caller asks git.
func readRef(gitDir, ref string) (sha string, found, ok bool) {
	if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") || strings.ContainsAny(ref, " ~^:?*[\\") {
		return "", false, false
	}
	b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref)))
	switch {
	case err == nil:
		sha = strings.TrimSpace(string(b))
		return sha, true, isSHA(sha)
	case !os.IsNotExist(err):
		return "", false, false
	}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if os.IsNotExist(err) {
		return "", false, true
	} else if err != nil {
		return "", false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(packed))
	for sc.Scan() {
		line := sc.Text()
		if s, name, cut := strings.Cut(line, " "); cut && name == ref && isSHA(s) {
			return s, true, true
		}
	}
	return "", false, sc.Err() == nil
}

// branchSHA returns the commit a branch points at, or "" if it does not
// exist.
func branchSHA(gitDir, branch string) string {
	if sha, _, ok := readRef(gitDir, "refs/heads/"+branch); ok {
		return sha // "" when there is no such branch
	}
	out, err := exec.Command("git", "--git-dir", gitDir, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commitOf is the commit rev names when the files say it plainly: a full
// sha, or a name git would take as a branch (git's own order: a ref under
// refs/, a tag, a branch); "" for anything else.
func commitOf(gitDir, rev string) string {
	if isSHA(rev) {
		return rev
	}
	if strings.HasPrefix(rev, "refs/") {
		sha, _, ok := readRef(gitDir, rev)
		if !ok {
			return ""
		}
		return sha
	}
	for _, ref := range []string{"refs/" + rev, "refs/tags/" + rev, "refs/heads/" + rev, "refs/remotes/" + rev} {
		sha, found, ok := readRef(gitDir, ref)
		if !ok || found && strings.HasPrefix(ref, "refs/tags/") {
			return "" // a tag may name a tag object: git peels it
		}
		if found {
			return sha
		}
	}
	return ""
}

// fileAt is path's content at rev, and whether it is there.
func (s *Server) fileAt(gitDir, rev, path string) ([]byte, bool) {
	key := ""
	if sha := commitOf(gitDir, rev); sha != "" {
		key = gitDir + "\x00" + sha + "\x00" + path
		s.filesMu.Lock()
		f, seen := s.files[key]
		s.filesMu.Unlock()
		if seen {
			return f.content, f.found
		}
		rev = sha
		// A seeded repository's first commit is loose objects: read
		// without a process.
		if content, found, ok := gitseed.ReadLoose(gitDir, sha, path); ok {
			f := fileRead{content: content, found: found}
			s.filesMu.Lock()
			s.files[key] = f
			s.filesMu.Unlock()
			return f.content, f.found
		}
	}
	out, err := exec.Command("git", "--git-dir", gitDir, "show", rev+":"+path).Output()
	f := fileRead{content: out, found: err == nil}
	if key != "" && (err == nil || isExit128(err)) {
		s.filesMu.Lock()
		s.files[key] = f
		s.filesMu.Unlock()
	}
	return f.content, f.found
}

// fileRead is a file read at a commit: its content, or that it is not
// there.
type fileRead struct {
	content []byte
	found   bool
}

// isExit128 is git's answer for a path or object that is not there (and
// not, say, a process that could not start).
func isExit128(err error) bool {
	ee, ok := err.(*exec.ExitError)
	return ok && ee.ExitCode() == 128
}
