package githubtest

import (
	"mime"
	"net/http"
	"os/exec"
	"path"
	"strings"
)

// WebURL is the fake's github.com (GITHUB_WEB_URL): it serves raw files
// at <WebURL>/<owner>/<repo>/raw/<ref>/<path>, where a PR body's images
// point.
func (s *Server) WebURL() string { return s.srv.URL + "/web" }

// getRaw answers a raw file from the repository's git at ref, a commit
// SHA or a branch, as github.com's /raw/ does (for a private repository,
// to anyone signed in: here, any request with a live token).
func (s *Server) getRaw(w http.ResponseWriter, r *http.Request, repo *Repo) {
	ref, file := r.PathValue("ref"), r.PathValue("path")
	if strings.HasPrefix(ref, "-") || strings.HasPrefix(file, "-") || strings.Contains(ref, ":") {
		http.NotFound(w, r)
		return
	}
	sha, err := exec.Command(mustGit(), "--git-dir", repo.GitDir, "rev-parse", "--verify", "--quiet", ref+"^{commit}").Output()
	if err != nil {
		http.NotFound(w, r)
		return
	}
	blob, err := exec.Command(mustGit(), "--git-dir", repo.GitDir, "cat-file", "blob", strings.TrimSpace(string(sha))+":"+file).Output()
	if err != nil {
		http.NotFound(w, r)
		return
	}
	typ := mime.TypeByExtension(path.Ext(file))
	if typ == "" {
		typ = "application/octet-stream"
	}
	w.Header().Set("Content-Type", typ)
	w.Write(blob)
}

// archiveRoutes serve GitHub's tarball link and the tarball behind it.
func (s *Server) archiveRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("GET /repos/{owner}/{repo}/tarball/{ref...}", s.getTarball)
	h("GET /codeload/{owner}/{repo}/tar.gz/{ref...}", s.getCodeload)
}

// getTarball answers GitHub's archive link: a redirect to the tarball of
// ref (codeload's, here getCodeload).
func (s *Server) getTarball(w http.ResponseWriter, r *http.Request, repo *Repo) {
	ref := r.PathValue("ref")
	if strings.HasPrefix(ref, "-") || strings.Contains(ref, ":") {
		http.NotFound(w, r)
		return
	}
	http.Redirect(w, r, s.srv.URL+"/codeload/"+repo.FullName()+"/tar.gz/"+ref, http.StatusFound)
}

// getCodeload is the tarball itself: `git archive` of ref under one top
// directory, as GitHub names it.
func (s *Server) getCodeload(w http.ResponseWriter, r *http.Request, repo *Repo) {
	ref := r.PathValue("ref")
	if strings.HasPrefix(ref, "-") || strings.Contains(ref, ":") {
		http.NotFound(w, r)
		return
	}
	sha, err := exec.Command(mustGit(), "--git-dir", repo.GitDir, "rev-parse", "--verify", "--quiet", ref+"^{commit}").Output()
	if err != nil {
		http.NotFound(w, r)
		return
	}
	id := strings.TrimSpace(string(sha))
	out, err := exec.Command(mustGit(), "--git-dir", repo.GitDir, "archive", "--format=tar.gz", "--prefix="+strings.ReplaceAll(repo.FullName(), "/", "-")+"-"+id[:7]+"/", id).Output()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Write(out)
}
