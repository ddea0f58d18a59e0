package githubtest

import (
	"os/exec"
	"strings"
)

// What tests read of a repository's git: refs, parents, a commit's files.

// Ref returns the commit a full ref name (refs/heads/x, refs/tags/y)
// points at, or "" when there is none.
func (s *Server) Ref(fullName, ref string) string {
	r := s.Repo(fullName)
	out, err := exec.Command(mustGit(), "--git-dir", r.GitDir, "rev-parse", "--verify", "-q", ref+"^{commit}").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// RefsWithPrefix lists the refs whose full name starts with prefix.
func (s *Server) RefsWithPrefix(fullName, prefix string) []string {
	r := s.Repo(fullName)
	out, err := exec.Command(mustGit(), "--git-dir", r.GitDir, "for-each-ref", "--format=%(refname)", prefix).Output()
	if err != nil {
		s.t.Fatalf("githubtest: refs of %s: %v", fullName, err)
	}
	return strings.Fields(string(out))
}

// Parents returns a commit's parents (none for a root commit).
func (s *Server) Parents(fullName, sha string) []string {
	r := s.Repo(fullName)
	out, err := exec.Command(mustGit(), "--git-dir", r.GitDir, "rev-list", "--parents", "-n", "1", sha).Output()
	if err != nil {
		s.t.Fatalf("githubtest: parents of %s in %s: %v", sha, fullName, err)
	}
	f := strings.Fields(string(out))
	return f[1:]
}

// TreeFiles returns every file (blob) of a commit's tree with its content.
func (s *Server) TreeFiles(fullName, sha string) map[string]string {
	r := s.Repo(fullName)
	out, err := exec.Command(mustGit(), "--git-dir", r.GitDir, "ls-tree", "-r", "-z", "--name-only", sha).Output()
	if err != nil {
		s.t.Fatalf("githubtest: tree of %s in %s: %v", sha, fullName, err)
	}
	files := map[string]string{}
	for _, p := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if p == "" {
			continue
		}
		content, _ := s.FileAt(fullName, sha, p)
		files[p] = content
	}
	return files
}

// IsAncestor reports whether commit a is an ancestor of (or is) commit b.
func (s *Server) IsAncestor(fullName, a, b string) bool {
	r := s.Repo(fullName)
	return exec.Command(mustGit(), "--git-dir", r.GitDir, "merge-base", "--is-ancestor", a, b).Run() == nil
}
