package githubtest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// GitHub's Git Data API (blobs, trees, commits, refs), backed by the real
// bare repository: what the API writes, `git` sees, and what the tests
// push or read with git, the API sees. Writes need contents:write, as on
// GitHub; a contents:read token (a plan or task sandbox's) is refused
// with 403 "Resource not accessible by integration". Writes count for
// the secondary rate limit like every other POST and PATCH.

func (s *Server) gitDataRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("POST /repos/{owner}/{repo}/git/blobs", s.createBlob)
	h("POST /repos/{owner}/{repo}/git/trees", s.createTree)
	h("POST /repos/{owner}/{repo}/git/commits", s.createCommit)
	h("GET /repos/{owner}/{repo}/git/commits/{sha}", s.getCommit)
	h("POST /repos/{owner}/{repo}/git/refs", s.createRef)
	h("GET /repos/{owner}/{repo}/git/ref/{ref...}", s.getRef)
	h("PATCH /repos/{owner}/{repo}/git/refs/{ref...}", s.updateRef)
	h("DELETE /repos/{owner}/{repo}/git/refs/{ref...}", s.deleteRef)
}

// contentsWrite answers a request whose token may not write the
// repository's contents, and reports whether it may.
func (s *Server) contentsWrite(w http.ResponseWriter, r *http.Request, repo *Repo) bool {
	tok := s.tokens[bearer(r)]
	if tok == nil {
		return true // the App's JWT or an unnarrowed fixture
	}
	if tok.InstallationID != repo.InstallationID || (len(tok.Repositories) > 0 && !slices.Contains(tok.Repositories, repo.Name)) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return false
	}
	if tok.Permissions != nil && tok.Permissions["contents"] != "write" {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
		return false
	}
	return true
}

// validTreePath is what GitHub stores in a tree: relative, no empty,
// ".", ".." or ".git" component, no NUL or newline.
func validTreePath(p string) bool {
	if p == "" || strings.ContainsAny(p, "\x00\n") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

// isSHA reports whether s is a full object id (never an option or a
// revision expression handed to git).
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func unprocessable(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": fmt.Sprintf(format, args...)})
}

// gitIn runs git on repo's bare repository with stdin and extra
// environment, returning its trimmed stdout.
func gitIn(repo *Repo, stdin []byte, env []string, args ...string) (string, error) {
	cmd := exec.Command(mustGit(), append([]string{"--git-dir", repo.GitDir}, args...)...)
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func (s *Server) apiURL(repo *Repo, format string, args ...any) string {
	return s.srv.URL + "/repos/" + repo.FullName() + fmt.Sprintf(format, args...)
}

func (s *Server) createBlob(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	var b struct {
		Content  *string `json:"content"`
		Encoding string  `json:"encoding"`
	}
	if err := decodeBody(r, &b); err != nil || b.Content == nil {
		unprocessable(w, "Invalid request: content is missing")
		return
	}
	data := []byte(*b.Content)
	switch b.Encoding {
	case "", "utf-8":
	case "base64":
		d, err := base64.StdEncoding.DecodeString(*b.Content)
		if err != nil {
			unprocessable(w, "content is not valid Base64")
			return
		}
		data = d
	default:
		unprocessable(w, "encoding %q is not utf-8 or base64", b.Encoding)
		return
	}
	sha, err := gitIn(repo, data, nil, "hash-object", "-w", "--stdin")
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"sha": sha, "url": s.apiURL(repo, "/git/blobs/%s", sha)})
}

// createTree builds a tree from blob entries (by sha or inline content)
// with a throw-away index, so nested paths make their subtrees as on
// GitHub and git itself refuses what it cannot store (".git", "..").
func (s *Server) createTree(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	var b struct {
		BaseTree string `json:"base_tree"`
		Tree     []struct {
			Path    string  `json:"path"`
			Mode    string  `json:"mode"`
			Type    string  `json:"type"`
			SHA     *string `json:"sha"`
			Content *string `json:"content"`
		} `json:"tree"`
	}
	if err := decodeBody(r, &b); err != nil {
		unprocessable(w, "Invalid request: %v", err)
		return
	}
	if b.BaseTree != "" {
		unprocessable(w, "githubtest: base_tree is not supported by the fake")
		return
	}
	var info strings.Builder
	for _, e := range b.Tree {
		if e.Type != "blob" || (e.Mode != "100644" && e.Mode != "100755") {
			unprocessable(w, "githubtest: only blob entries (100644, 100755) are supported, not %s %s", e.Mode, e.Type)
			return
		}
		if !validTreePath(e.Path) {
			unprocessable(w, "tree.path contains a malformed path component")
			return
		}
		var sha string
		switch {
		case e.Content != nil:
			var err error
			if sha, err = gitIn(repo, []byte(*e.Content), nil, "hash-object", "-w", "--stdin"); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
				return
			}
		case e.SHA != nil:
			if !isSHA(*e.SHA) {
				unprocessable(w, "tree.sha %q is not a valid SHA", *e.SHA)
				return
			}
			if _, err := gitIn(repo, nil, nil, "cat-file", "-e", *e.SHA+"^{blob}"); err != nil {
				unprocessable(w, "tree.sha %s is not a valid blob", *e.SHA)
				return
			}
			sha = *e.SHA
		default:
			unprocessable(w, "githubtest: deleting entries needs base_tree, which the fake does not support")
			return
		}
		fmt.Fprintf(&info, "%s %s\t%s\n", e.Mode, sha, e.Path)
	}
	tmp, err := os.MkdirTemp(s.dir, "index-")
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := gitIn(repo, []byte(info.String()), env, "update-index", "--add", "--index-info"); err != nil {
		unprocessable(w, "tree.path contains a malformed path component (%v)", err)
		return
	}
	sha, err := gitIn(repo, nil, env, "write-tree")
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"sha": sha, "url": s.apiURL(repo, "/git/trees/%s", sha), "truncated": false})
}

func (s *Server) createCommit(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	type person struct{ Name, Email string }
	var b struct {
		Message   string   `json:"message"`
		Tree      string   `json:"tree"`
		Parents   []string `json:"parents"`
		Author    *person  `json:"author"`
		Committer *person  `json:"committer"`
	}
	if err := decodeBody(r, &b); err != nil || b.Message == "" || b.Tree == "" {
		unprocessable(w, "Invalid request: message and tree are required")
		return
	}
	if _, err := gitIn(repo, nil, nil, "cat-file", "-e", b.Tree+"^{tree}"); err != nil || !isSHA(b.Tree) {
		unprocessable(w, "Tree SHA does not exist")
		return
	}
	// GitHub fills an omitted author with the authenticated identity: for
	// an installation token, the App's bot account.
	author := person{Name: AppLogin, Email: "1+" + AppLogin + "@users.noreply.github.com"}
	if b.Author != nil {
		author = *b.Author
	}
	committer := author
	if b.Committer != nil {
		committer = *b.Committer
	}
	args := []string{"commit-tree", b.Tree}
	for _, p := range b.Parents {
		if _, err := gitIn(repo, nil, nil, "cat-file", "-e", p+"^{commit}"); err != nil || !isSHA(p) {
			unprocessable(w, "Parent SHA does not exist or is not a commit object")
			return
		}
		args = append(args, "-p", p)
	}
	env := []string{"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + committer.Name, "GIT_COMMITTER_EMAIL=" + committer.Email}
	sha, err := gitIn(repo, []byte(b.Message), env, args...)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	s.writeCommit(w, http.StatusCreated, repo, sha)
}

func (s *Server) getCommit(w http.ResponseWriter, r *http.Request, repo *Repo) {
	s.writeCommit(w, http.StatusOK, repo, r.PathValue("sha"))
}

// writeCommit answers a commit object as the Git Data API shows it.
func (s *Server) writeCommit(w http.ResponseWriter, code int, repo *Repo, sha string) {
	if !isSHA(sha) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	raw, err := gitIn(repo, nil, nil, "cat-file", "commit", sha)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	head, message, _ := strings.Cut(raw, "\n\n")
	var tree string
	parents := []map[string]any{}
	for _, line := range strings.Split(head, "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "tree":
			tree = v
		case "parent":
			parents = append(parents, map[string]any{"sha": v, "url": s.apiURL(repo, "/git/commits/%s", v)})
		}
	}
	writeJSON(w, code, map[string]any{
		"sha": sha, "message": message, "url": s.apiURL(repo, "/git/commits/%s", sha),
		"html_url": s.WebURL() + "/" + repo.FullName() + "/commit/" + sha,
		"tree":     map[string]any{"sha": tree, "url": s.apiURL(repo, "/git/trees/%s", tree)},
		"parents":  parents,
	})
}

// validRef is what GitHub accepts as a ref to create: refs/ and at least
// two slashes, and a name git accepts.
func validRef(repo *Repo, ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || strings.Count(ref, "/") < 2 {
		return false
	}
	_, err := gitIn(repo, nil, nil, "check-ref-format", ref)
	return err == nil
}

func (s *Server) writeRef(w http.ResponseWriter, code int, repo *Repo, ref, sha string) {
	writeJSON(w, code, map[string]any{
		"ref": ref, "url": s.apiURL(repo, "/git/%s", ref),
		"object": map[string]any{"sha": sha, "type": "commit", "url": s.apiURL(repo, "/git/commits/%s", sha)},
	})
}

func (s *Server) createRef(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	var b struct{ Ref, SHA string }
	if err := decodeBody(r, &b); err != nil || !validRef(repo, b.Ref) {
		unprocessable(w, "Reference name is not valid")
		return
	}
	if _, err := gitIn(repo, nil, nil, "cat-file", "-e", b.SHA+"^{commit}"); err != nil || !isSHA(b.SHA) {
		unprocessable(w, "Object does not exist")
		return
	}
	// The empty old value makes git create the ref or fail: no overwrite.
	if _, err := gitIn(repo, nil, nil, "update-ref", b.Ref, b.SHA, ""); err != nil {
		unprocessable(w, "Reference already exists")
		return
	}
	s.writeRef(w, http.StatusCreated, repo, b.Ref, b.SHA)
}

func (s *Server) getRef(w http.ResponseWriter, r *http.Request, repo *Repo) {
	ref := "refs/" + r.PathValue("ref")
	sha, err := gitIn(repo, nil, nil, "rev-parse", "--verify", "-q", ref)
	if err != nil || !validRef(repo, ref) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	s.writeRef(w, http.StatusOK, repo, ref, sha)
}

func (s *Server) updateRef(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	ref := "refs/" + r.PathValue("ref")
	var b struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if err := decodeBody(r, &b); err != nil || !validRef(repo, ref) {
		unprocessable(w, "Reference does not exist")
		return
	}
	old, err := gitIn(repo, nil, nil, "rev-parse", "--verify", "-q", ref)
	if err != nil {
		unprocessable(w, "Reference does not exist")
		return
	}
	if _, err := gitIn(repo, nil, nil, "cat-file", "-e", b.SHA+"^{commit}"); err != nil || !isSHA(b.SHA) {
		unprocessable(w, "Object does not exist")
		return
	}
	if !b.Force {
		if _, err := gitIn(repo, nil, nil, "merge-base", "--is-ancestor", old, b.SHA); err != nil {
			unprocessable(w, "Update is not a fast forward")
			return
		}
	}
	if _, err := gitIn(repo, nil, nil, "update-ref", ref, b.SHA, old); err != nil {
		unprocessable(w, "Reference cannot be updated")
		return
	}
	s.writeRef(w, http.StatusOK, repo, ref, b.SHA)
}

// deleteRef deletes a ref as GitHub does: 204, or 422 "Reference does
// not exist".
func (s *Server) deleteRef(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !s.contentsWrite(w, r, repo) {
		return
	}
	ref := "refs/" + r.PathValue("ref")
	if _, err := gitIn(repo, nil, nil, "rev-parse", "--verify", "-q", ref); err != nil || !validRef(repo, ref) {
		unprocessable(w, "Reference does not exist")
		return
	}
	if _, err := gitIn(repo, nil, nil, "update-ref", "-d", ref); err != nil {
		unprocessable(w, "Reference cannot be deleted")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
