// Package githubtest is an in-process GitHub for tests: the REST endpoints
// sandbox-bot uses, served by httptest and spoken to by the real go-github
// client, plus real git repositories served over smart HTTP by
// `git http-backend` (through net/http/cgi) that only accept installation
// tokens minted for that repository, with GitHub's token semantics
// (tokens.go).
//
// State is kept the way GitHub keeps it (issues, comments, labels, pull
// requests, check runs) so tests assert on what a person would see.
package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/testkit/gitseed"
)

// Request is one API call the fake received.
type Request struct {
	Method string
	Path   string
	Query  string
	Body   []byte
	Auth   string
}

// Comment is an issue or PR conversation comment.
type Comment struct {
	ID        int64
	User      string
	Body      string
	CreatedAt time.Time
	Reactions []string
}

// Issue is an issue or a pull request (GitHub numbers them together).
type Issue struct {
	Number    int
	Title     string
	Body      string
	User      string
	State     string
	Labels    []string
	Comments  []*Comment
	Reactions []string
	PR        *PullRequest
}

// PullRequest is the pull-request half of an Issue.
type PullRequest struct {
	Head      string
	Base      string
	HeadSHA   string
	Draft     bool
	Reviewers []string
	Merged    bool
	// ReviewComments are inline review comments, for revise runs.
	ReviewComments []*ReviewComment
	// Reviews are the submitted reviews (reviews.go).
	Reviews []*Review
	// UpdateBranchFails makes PUT update-branch answer 422 (a conflict), so
	// the bot falls back to a sandbox rebase.
	UpdateBranchFails bool
	UpdateBranchCalls int
	// HeadRepo is the full name of the repository the head branch lives
	// in when it is not the base repository (a fork).
	HeadRepo string
}

// CheckRun is a check run as last updated.
type CheckRun struct {
	ID         int64
	Name       string
	HeadSHA    string
	Status     string
	Conclusion string
	Title      string
	Summary    string
	Text       string
	Updates    int
	// DetailsURL is the check run's "Details" link.
	DetailsURL string
	ExternalID string
	// App is the reporting app's slug (the App's own for the runs the bot
	// creates); SuiteID its check suite (ci.go).
	App     string
	SuiteID int64
	// Annotations, and for an Actions job its Steps and Log (ci.go).
	Annotations []Annotation
	Steps       []Step
	Log         string
}

// Token is an installation token the fake minted.
type Token struct {
	Value          string
	InstallationID int64
	Repositories   []string
	Permissions    map[string]string
	ExpiresAt      time.Time
	// RevokedAt is when DELETE /installation/token revoked it (zero: live).
	RevokedAt time.Time
}

// Repo is one repository with a real bare git repository behind it.
type Repo struct {
	Owner, Name    string
	ID             int64
	DefaultBranch  string
	InstallationID int64
	// Permissions maps a user login to admin, maintain, write, triage, read
	// or none (the default for unknown users).
	Permissions map[string]string
	Labels      map[string]bool
	Issues      map[int]*Issue
	CheckRuns   map[int64]*CheckRun
	// GitDir is the bare repository.
	GitDir string
	// TeamMembers maps "org/team" to members, for team allowlists.
	nextNumber int
}

// FullName is owner/name.
func (r *Repo) FullName() string { return r.Owner + "/" + r.Name }

// Server is the fake GitHub.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	limit *writeLimit
	dir   string
	// gitBackend serves the repositories under dir/git (serveGit).
	gitBackend http.Handler

	mu    sync.Mutex
	repos map[string]*Repo
	// moved are the old names of renamed or transferred repositories, by
	// the repository id GitHub redirects them to.
	moved     map[string]int64
	tokens    map[string]*Token
	requests  []Request
	nextID    int64
	teams     map[string][]string
	changed   chan struct{}
	gitPushes int
	// revokeFailures is how many revocations still fail (FailRevocations).
	revokeFailures int
	// people is OAuth sign-in and user tokens (oauth.go).
	people       *people
	manifestApps []*ManifestApp // manifest.go
	// attachments are uploaded files by id, signKey signs their (and the
	// job logs') download URLs (rendered.go).
	attachments map[string]*Attachment
	signKey     []byte
	// ci is the checks other apps report, by repository (ci.go).
	ci map[string]*repoCI

	// files are the files read at a commit (refread.go), under a lock of
	// their own: the routes read them holding mu.
	filesMu sync.Mutex
	files   map[string]fileRead
}

// Options configure New.
type Options struct {
	// Listen is the address to listen on (default 127.0.0.1:0). Tests whose
	// sandbox containers must reach the fake use the docker bridge address.
	Listen string
	// SecondaryLimit, when set, answers content-creating requests over it
	// the way GitHub's secondary rate limit does.
	SecondaryLimit RateLimit
}

// New starts a fake GitHub; it is closed when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{
		t:       t,
		dir:     t.TempDir(),
		repos:   map[string]*Repo{},
		moved:   map[string]int64{},
		tokens:  map[string]*Token{},
		teams:   map[string][]string{},
		nextID:  1000,
		changed: make(chan struct{}),
		files:   map[string]fileRead{},
	}
	s.limit = newWriteLimit(opts.SecondaryLimit)
	backend, err := gitserve.Backend("", filepath.Join(s.dir, "git"), "", gitservetest.Hermetic()...)
	if err != nil {
		t.Fatalf("githubtest: %v", err)
	}
	s.gitBackend = backend
	s.srv = httptest.NewUnstartedServer(s.limitWrites(s.routes()))
	if opts.Listen != "" {
		l, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			t.Fatalf("githubtest: listen %s: %v", opts.Listen, err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = l
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL, with a trailing slash (GITHUB_V3_API_URL).
func (s *Server) URL() string { return s.srv.URL + "/" }

// GitURL is the clone URL of a repository.
func (s *Server) GitURL(fullName string) string { return s.srv.URL + "/git/" + fullName + ".git" }

// AddRepo creates a repository with the given files committed on its
// default branch "main", installed under installationID.
func (s *Server) AddRepo(fullName string, installationID int64, files map[string]string) *Repo {
	s.t.Helper()
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok {
		s.t.Fatalf("githubtest: repo %q is not owner/name", fullName)
	}
	gitDir := filepath.Join(s.dir, "git", owner, name+".git")
	// Pushes over smart HTTP need http.receivepack.
	if err := gitseed.InitBare(gitDir, "main", "[http]\n\treceivepack = true\n"); err != nil {
		s.t.Fatalf("githubtest: create %s: %v", fullName, err)
	}
	if len(files) == 0 {
		files = map[string]string{"README.md": "# " + name + "\n"}
	}
	s.seed(gitDir, "main", "", files, "initial commit")

	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	r := &Repo{
		Owner: owner, Name: name, ID: s.nextID, DefaultBranch: "main", InstallationID: installationID,
		Permissions: map[string]string{}, Labels: map[string]bool{}, Issues: map[int]*Issue{},
		CheckRuns: map[int64]*CheckRun{}, GitDir: gitDir, nextNumber: 1,
	}
	s.repos[fullName] = r
	delete(s.moved, fullName)
	return r
}

// RenameRepo renames (or transfers) a repository, as GitHub does: same
// id, new name, and the old name redirects to /repositories/{id} until a
// new repository takes it.
func (s *Server) RenameRepo(oldName, newName string) {
	s.t.Helper()
	owner, name, ok := strings.Cut(newName, "/")
	if !ok {
		s.t.Fatalf("githubtest: repo %q is not owner/name", newName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[oldName]
	if r == nil || s.repos[newName] != nil {
		s.t.Fatalf("githubtest: rename %s to %s: no such repository, or the name is taken", oldName, newName)
	}
	gitDir := filepath.Join(s.dir, "git", owner, name+".git")
	if err := os.MkdirAll(filepath.Dir(gitDir), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(r.GitDir, gitDir); err != nil {
		s.t.Fatalf("githubtest: rename %s: %v", oldName, err)
	}
	delete(s.repos, oldName)
	r.Owner, r.Name, r.GitDir = owner, name, gitDir
	s.repos[newName] = r
	s.moved[oldName] = r.ID
	delete(s.moved, newName)
	s.notify()
}

// CommitFile commits a file on a branch of the repo (as a person would push).
func (s *Server) CommitFile(fullName, branch, path, content, message string) string {
	s.t.Helper()
	r := s.Repo(fullName)
	parent := s.BranchSHA(fullName, branch)
	if parent == "" {
		s.t.Fatalf("githubtest: commit %s on %s of %s: no such branch", path, branch, fullName)
	}
	return s.seed(r.GitDir, branch, parent, map[string]string{path: content}, message)
}

// seed writes a commit by the fixture's user straight into gitDir.
func (s *Server) seed(gitDir, branch, parent string, files map[string]string, message string) string {
	s.t.Helper()
	sha, err := gitseed.Write(gitDir, append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"), gitseed.Commit{
		Branch: branch, Parent: parent, Committer: "Octo Cat <octo@example.com>", Mode: "100644", Files: files, Message: message,
	})
	if err != nil {
		s.t.Fatalf("githubtest: %v", err)
	}
	return sha
}

// CreateBranch makes branch point at from's commit (a pushed agent branch).
func (s *Server) CreateBranch(fullName, branch, from string) string {
	s.t.Helper()
	r := s.Repo(fullName)
	s.git("", "--git-dir", r.GitDir, "branch", "-f", branch, from)
	return s.BranchSHA(fullName, branch)
}

// BranchSHA returns the commit a branch points at, or "" if it does not exist.
func (s *Server) BranchSHA(fullName, branch string) string {
	return branchSHA(s.Repo(fullName).GitDir, branch)
}

// FileAt returns a file's content at a ref, or "" and false.
func (s *Server) FileAt(fullName, ref, path string) (string, bool) {
	out, ok := s.fileAt(s.Repo(fullName).GitDir, ref, path)
	return string(out), ok
}

func (s *Server) git(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("githubtest: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Repo returns a repository by full name.
func (s *Server) Repo(fullName string) *Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[fullName]
	if !ok {
		s.t.Fatalf("githubtest: no repo %s", fullName)
	}
	return r
}

// SetPermission sets a user's permission on a repo.
func (s *Server) SetPermission(fullName, user, perm string) {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Permissions[user] = perm
}

// AddTeamMember puts user in org/team.
func (s *Server) AddTeamMember(orgTeam, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teams[orgTeam] = append(s.teams[orgTeam], user)
}

// AddIssue creates an issue and returns its number.
func (s *Server) AddIssue(fullName, user, title, body string) int {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := r.nextNumber
	r.nextNumber++
	r.Issues[n] = &Issue{Number: n, Title: title, Body: body, User: user, State: "open"}
	s.notify()
	return n
}

// AddComment adds a comment as user and returns its id (for building
// issue_comment payloads).
func (s *Server) AddComment(fullName string, number int, user, body string) int64 {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	iss := r.Issues[number]
	if iss == nil {
		s.t.Fatalf("githubtest: no issue #%d in %s", number, fullName)
	}
	s.nextID++
	iss.Comments = append(iss.Comments, &Comment{ID: s.nextID, User: user, Body: body, CreatedAt: time.Now()})
	s.notify()
	return s.nextID
}

// AddPullRequest opens a pull request as user (head must exist).
func (s *Server) AddPullRequest(fullName, user, title, head, base string) int {
	r := s.Repo(fullName)
	sha := s.BranchSHA(fullName, head)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := r.nextNumber
	r.nextNumber++
	r.Issues[n] = &Issue{Number: n, Title: title, User: user, State: "open", PR: &PullRequest{Head: head, Base: base, HeadSHA: sha}}
	s.notify()
	return n
}

// SetBody replaces an issue's or PR's body.
func (s *Server) SetBody(fullName string, number int, body string) {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[number].Body = body
	s.notify()
}

// AddForkPullRequest opens a pull request as user from branch head of the
// fork headRepo (owner/name) into base of fullName.
func (s *Server) AddForkPullRequest(fullName, user, title, headRepo, head, base string) int {
	n := s.AddPullRequest(fullName, user, title, head, base)
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[n].PR.HeadRepo = headRepo
	r.Issues[n].PR.HeadSHA = ""
	return n
}

// SetUpdateBranchFails makes the PR's update-branch API report a conflict.
func (s *Server) SetUpdateBranchFails(fullName string, number int, fails bool) {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[number].PR.UpdateBranchFails = fails
}

// Issue returns a deep-enough copy of an issue for assertions.
func (s *Server) Issue(fullName string, number int) Issue {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	iss := r.Issues[number]
	if iss == nil {
		return Issue{}
	}
	cp := *iss
	cp.Labels = append([]string(nil), iss.Labels...)
	cp.Comments = nil
	for _, c := range iss.Comments {
		cc := *c
		cp.Comments = append(cp.Comments, &cc)
	}
	if iss.PR != nil {
		pr := *iss.PR
		pr.ReviewComments = nil
		for _, c := range iss.PR.ReviewComments {
			cc := *c
			pr.ReviewComments = append(pr.ReviewComments, &cc)
		}
		cp.PR = &pr
	}
	return cp
}

// PullRequests lists the repo's pull requests, oldest first.
func (s *Server) PullRequests(fullName string) []Issue {
	r := s.Repo(fullName)
	s.mu.Lock()
	var nums []int
	for n, iss := range r.Issues {
		if iss.PR != nil {
			nums = append(nums, n)
		}
	}
	s.mu.Unlock()
	sort.Ints(nums)
	var out []Issue
	for _, n := range nums {
		out = append(out, s.Issue(fullName, n))
	}
	return out
}

// CheckRuns returns the repo's check runs.
func (s *Server) CheckRuns(fullName string) []CheckRun {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range r.CheckRuns {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RepoLabels returns the labels defined in the repo.
func (s *Server) RepoLabels(fullName string) []string {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for l := range r.Labels {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// Tokens returns the installation tokens minted so far.
func (s *Server) Tokens() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Token
	for _, t := range s.tokens {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out
}

// Requests returns every API call received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// CountRequests counts calls whose "METHOD path" starts with prefix.
func (s *Server) CountRequests(prefix string) int {
	n := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Method+" "+r.Path, prefix) {
			n++
		}
	}
	return n
}

// WaitFor polls cond after every state change until it holds or the
// timeout passes, then fails the test with what. Conditions on state outside
// this server (a backend's locks, a bot's queue) change without waking it,
// so it also polls every 20ms: a coarser tick was most of such a wait.
func (s *Server) WaitFor(timeout time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			s.t.Fatalf("githubtest: timed out after %s waiting for %s", timeout, what)
		}
	}
}

// notify wakes WaitFor; callers hold mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request, repo *Repo)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var repo *Repo
			if o := r.PathValue("owner"); o != "" {
				repo = s.repos[o+"/"+r.PathValue("repo")]
				if id, ok := s.moved[o+"/"+r.PathValue("repo")]; repo == nil && ok {
					// GitHub's answer for a renamed or transferred repository.
					w.Header().Set("Location", s.srv.URL+"/repositories/"+strconv.FormatInt(id, 10)+strings.TrimPrefix(r.URL.Path, "/repos/"+o+"/"+r.PathValue("repo")))
					writeJSON(w, http.StatusMovedPermanently, map[string]string{"message": "Moved Permanently"})
					return
				}
				if repo == nil {
					writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
					return
				}
			}
			fn(w, r, repo)
			s.notify()
		})
	}
	h("GET /app", s.getApp)
	h("POST /app/installations/{id}/access_tokens", s.createToken)
	h("DELETE /installation/token", s.revokeToken)
	h("GET /app/installations", s.listInstallations)
	h("GET /installation/repositories", s.installationRepos)
	h("GET /repos/{owner}/{repo}", s.getRepo)
	h("GET /repositories/{id}", s.getRepoByID)
	h("GET /repos/{owner}/{repo}/installation", s.repoInstallation)
	h("GET /repos/{owner}/{repo}/contents/{path...}", s.getContents)
	h("GET /repos/{owner}/{repo}/collaborators/{user}/permission", s.getPermission)
	h("GET /orgs/{org}/teams/{team}/memberships/{user}", s.teamMembership)
	h("GET /repos/{owner}/{repo}/issues/{number}", s.getIssue)
	// issues/{number}/comments and issues/comments/{id} share one pattern:
	// Go's mux will not tell them apart (issueSub).
	h("GET /repos/{owner}/{repo}/issues/{number}/{what}", listOrOne(s.listComments, s.getComment))
	h("POST /repos/{owner}/{repo}/issues/{number}/comments", s.createComment)
	h("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.editComment)
	h("POST /repos/{owner}/{repo}/issues/{number}/reactions", s.issueReaction)
	h("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", s.commentReaction)
	h("POST /repos/{owner}/{repo}/issues/{number}/labels", s.addLabels)
	h("DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}", s.removeLabel)
	h("GET /repos/{owner}/{repo}/labels/{name}", s.getLabel)
	h("POST /repos/{owner}/{repo}/labels", s.createLabel)
	h("GET /repos/{owner}/{repo}/pulls", s.listPulls)
	h("POST /repos/{owner}/{repo}/pulls", s.createPull)
	h("GET /repos/{owner}/{repo}/pulls/{number}", s.getPull)
	h("PATCH /repos/{owner}/{repo}/pulls/{number}", s.editPull)
	h("PUT /repos/{owner}/{repo}/pulls/{number}/update-branch", s.updateBranch)
	h("POST /repos/{owner}/{repo}/pulls/{number}/requested_reviewers", s.requestReviewers)
	// pulls/{number}/comments and pulls/comments/{id} share one pattern
	// (pullSub), as the issues' do.
	h("GET /repos/{owner}/{repo}/pulls/{number}/{what}", listOrOne(s.listReviewComments, s.getReviewComment))
	h("POST /repos/{owner}/{repo}/check-runs", s.createCheckRun)
	h("PATCH /repos/{owner}/{repo}/check-runs/{id}", s.updateCheckRun)
	h("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", s.listCheckRuns)
	s.userRoutes(h)
	s.reviewRoutes(h)
	s.issueRoutes(h)
	s.renderedRoutes(h)
	s.ciRoutes(h)
	s.gitDataRoutes(h)
	h("GET /web/{owner}/{repo}/raw/{ref}/{path...}", s.getRaw)
	s.archiveRoutes(h)
	mux.HandleFunc("/git/", s.serveGit)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.serveManifestFlow(w, r) || s.serveUnauthenticated(w, r) {
			return
		}
		// /login/oauth/ is GitHub's web sign-in, not the API: no token.
		if !strings.HasPrefix(r.URL.Path, "/git/") && !strings.HasPrefix(strings.TrimPrefix(r.URL.Path, "/web"), "/login/oauth/") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			s.mu.Lock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body, Auth: r.Header.Get("Authorization")})
			s.mu.Unlock()
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") && !strings.HasPrefix(r.Header.Get("Authorization"), "token ") {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Requires authentication"})
				return
			}
			s.mu.Lock()
			dead := s.deadToken(bearer(r))
			s.mu.Unlock()
			if dead {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func decodeBody(r *http.Request, v any) error {
	return json.NewDecoder(r.Body).Decode(v)
}

func number(r *http.Request) int {
	n, _ := strconv.Atoi(r.PathValue("number"))
	return n
}

func (s *Server) user(login string) map[string]any {
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return map[string]any{"login": login, "id": len(login), "type": typ}
}

func (s *Server) repoJSON(r *Repo) map[string]any {
	return map[string]any{
		"id": r.ID, "name": r.Name, "full_name": r.FullName(), "default_branch": r.DefaultBranch,
		"owner":     map[string]any{"login": r.Owner, "type": "Organization"},
		"clone_url": s.GitURL(r.FullName()), "html_url": s.srv.URL + "/" + r.FullName(), "private": true,
	}
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, _ *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var opts struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	if r.ContentLength > 0 {
		if err := decodeBody(r, &opts); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": err.Error()})
			return
		}
	}
	s.nextID++
	tok := &Token{
		Value: fmt.Sprintf("ghs_fake%d%s", s.nextID, strings.Repeat("x", 20)), InstallationID: id,
		Repositories: opts.Repositories, Permissions: opts.Permissions, ExpiresAt: time.Now().Add(time.Hour),
	}
	s.tokens[tok.Value] = tok
	perms := opts.Permissions
	if perms == nil {
		perms = map[string]string{"contents": "write", "issues": "write", "pull_requests": "write", "checks": "write", "metadata": "read"}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok.Value, "expires_at": tok.ExpiresAt.UTC().Format(time.RFC3339), "permissions": perms})
}

func (s *Server) listInstallations(w http.ResponseWriter, _ *http.Request, _ *Repo) {
	seen := map[int64]string{}
	for _, r := range s.repos {
		seen[r.InstallationID] = r.Owner
	}
	var out []map[string]any
	for id, owner := range seen {
		out = append(out, map[string]any{"id": id, "account": map[string]any{"login": owner}})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) installationRepos(w http.ResponseWriter, r *http.Request, _ *Repo) {
	tok := s.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "token ")]
	var list []map[string]any
	for _, name := range sortedRepoNames(s.repos) {
		repo := s.repos[name]
		if tok == nil || repo.InstallationID == tok.InstallationID {
			list = append(list, s.repoJSON(repo))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "repositories": list})
}

func sortedRepoNames(m map[string]*Repo) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *Server) getRepo(w http.ResponseWriter, _ *http.Request, repo *Repo) {
	writeJSON(w, http.StatusOK, s.repoJSON(repo))
}

func (s *Server) getRepoByID(w http.ResponseWriter, r *http.Request, _ *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	for _, repo := range s.repos {
		if repo.ID == id {
			writeJSON(w, http.StatusOK, s.repoJSON(repo))
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (s *Server) repoInstallation(w http.ResponseWriter, _ *http.Request, repo *Repo) {
	writeJSON(w, http.StatusOK, map[string]any{"id": repo.InstallationID, "account": map[string]any{"login": repo.Owner}})
}

func (s *Server) getContents(w http.ResponseWriter, r *http.Request, repo *Repo) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = repo.DefaultBranch
	}
	out, ok := s.fileAt(repo.GitDir, ref, r.PathValue("path"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "file", "encoding": "base64", "path": r.PathValue("path"), "name": filepath.Base(r.PathValue("path")),
		"content": base64.StdEncoding.EncodeToString(out), "size": len(out),
	})
}

func (s *Server) getPermission(w http.ResponseWriter, r *http.Request, repo *Repo) {
	u := r.PathValue("user")
	p, ok := repo.Permissions[u]
	if !ok {
		p = "none"
	}
	// GitHub reports maintain as write and triage as read in "permission";
	// role_name carries the fine-grained one.
	legacy := p
	switch p {
	case "maintain":
		legacy = "write"
	case "triage":
		legacy = "read"
	}
	writeJSON(w, http.StatusOK, map[string]any{"permission": legacy, "role_name": p, "user": s.user(u)})
}

func (s *Server) teamMembership(w http.ResponseWriter, r *http.Request, _ *Repo) {
	for _, m := range s.teams[r.PathValue("org")+"/"+r.PathValue("team")] {
		if m == r.PathValue("user") {
			writeJSON(w, http.StatusOK, map[string]any{"state": "active", "role": "member"})
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (s *Server) issueJSON(repo *Repo, iss *Issue) map[string]any {
	labels := []map[string]any{}
	for _, l := range iss.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	m := map[string]any{
		"number": iss.Number, "title": iss.Title, "body": iss.Body, "state": iss.State, "labels": labels,
		"user": s.user(iss.User), "comments": len(iss.Comments),
		"html_url": fmt.Sprintf("%s/%s/issues/%d", s.srv.URL, repo.FullName(), iss.Number),
	}
	if iss.PR != nil {
		m["pull_request"] = map[string]any{"url": fmt.Sprintf("%s/repos/%s/pulls/%d", s.srv.URL, repo.FullName(), iss.Number)}
	}
	return m
}

func (s *Server) getIssue(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := s.issueJSON(repo, iss)
	s.withHTML(r, out, iss.Body)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) commentJSON(repo *Repo, n int, c *Comment) map[string]any {
	return map[string]any{
		"id": c.ID, "body": c.Body, "user": s.user(c.User), "created_at": c.CreatedAt.UTC().Format(time.RFC3339),
		"html_url": fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", s.srv.URL, repo.FullName(), n, c.ID),
	}
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := []map[string]any{}
	for _, c := range iss.Comments {
		cj := s.commentJSON(repo, iss.Number, c)
		s.withHTML(r, cj, c.Body)
		out = append(out, cj)
	}
	writeJSON(w, http.StatusOK, out)
}

// AppSlug is the App's slug (GET /app); its bot account is AppLogin.
const AppSlug = "sandbox-bot"

// AppLogin is the login the bot's own comments are recorded under.
const AppLogin = AppSlug + "[bot]"

// getApp is GET /app, which only the App's JWT may call.
func (s *Server) getApp(w http.ResponseWriter, r *http.Request, _ *Repo) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": 1, "slug": AppSlug, "name": "Sandbox Bot", "owner": map[string]any{"login": "octo-org", "type": "Organization"}})
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var body struct {
		Body string `json:"body"`
	}
	if err := decodeBody(r, &body); err != nil || body.Body == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "body is required"})
		return
	}
	s.nextID++
	c := &Comment{ID: s.nextID, User: AppLogin, Body: body.Body, CreatedAt: time.Now()}
	iss.Comments = append(iss.Comments, c)
	writeJSON(w, http.StatusCreated, s.commentJSON(repo, iss.Number, c))
}

func (s *Server) findComment(repo *Repo, id int64) (*Issue, *Comment) {
	for _, iss := range repo.Issues {
		for _, c := range iss.Comments {
			if c.ID == id {
				return iss, c
			}
		}
	}
	return nil, nil
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	iss, c := s.findComment(repo, id)
	if c == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var body struct {
		Body string `json:"body"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": err.Error()})
		return
	}
	c.Body = body.Body
	writeJSON(w, http.StatusOK, s.commentJSON(repo, iss.Number, c))
}

func (s *Server) issueReaction(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var body struct {
		Content string `json:"content"`
	}
	if iss == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	iss.Reactions = append(iss.Reactions, body.Content)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": body.Content})
}

func (s *Server) commentReaction(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	_, c := s.findComment(repo, id)
	var body struct {
		Content string `json:"content"`
	}
	if c == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	c.Reactions = append(c.Reactions, body.Content)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": body.Content})
}

func (s *Server) addLabels(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var labels []string
	if iss == nil || decodeBody(r, &labels) != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "bad request"})
		return
	}
	for _, l := range labels {
		repo.Labels[l] = true // GitHub creates missing labels on add
		if !slices.Contains(iss.Labels, l) {
			iss.Labels = append(iss.Labels, l)
		}
	}
	out := []map[string]any{}
	for _, l := range iss.Labels {
		out = append(out, map[string]any{"name": l})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) removeLabel(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	name := r.PathValue("name")
	if iss == nil || !slices.Contains(iss.Labels, name) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Label does not exist"})
		return
	}
	var kept []string
	for _, l := range iss.Labels {
		if l != name {
			kept = append(kept, l)
		}
	}
	iss.Labels = kept
	writeJSON(w, http.StatusOK, []any{})
}

func (s *Server) getLabel(w http.ResponseWriter, r *http.Request, repo *Repo) {
	if !repo.Labels[r.PathValue("name")] {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name")})
}

func (s *Server) createLabel(w http.ResponseWriter, r *http.Request, repo *Repo) {
	var body struct {
		Name  string `json:"name"`
		Color string `json:"color"`
	}
	if err := decodeBody(r, &body); err != nil || body.Name == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "name is required"})
		return
	}
	if repo.Labels[body.Name] {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "Label", "code": "already_exists", "field": "name"}}})
		return
	}
	repo.Labels[body.Name] = true
	writeJSON(w, http.StatusCreated, map[string]any{"name": body.Name, "color": body.Color})
}

func (s *Server) pullJSON(repo *Repo, iss *Issue) map[string]any {
	m := s.issueJSON(repo, iss)
	head := s.repoJSON(repo)
	if iss.PR.HeadRepo != "" {
		owner, name, _ := strings.Cut(iss.PR.HeadRepo, "/")
		head = map[string]any{"id": repo.ID + 100000, "name": name, "full_name": iss.PR.HeadRepo, "fork": true,
			"owner": map[string]any{"login": owner, "type": "User"}, "clone_url": s.srv.URL + "/git/" + iss.PR.HeadRepo + ".git"}
	}
	if iss.PR.HeadRepo == "" && iss.State == "open" {
		// GitHub's head.sha follows the branch: a push moves it.
		if sha := branchSHA(repo.GitDir, iss.PR.Head); sha != "" {
			iss.PR.HeadSHA = sha
		}
	}
	m["head"] = map[string]any{"ref": iss.PR.Head, "sha": iss.PR.HeadSHA, "repo": head}
	m["base"] = map[string]any{"ref": iss.PR.Base, "repo": s.repoJSON(repo)}
	m["draft"] = iss.PR.Draft
	m["merged"] = iss.PR.Merged
	m["html_url"] = fmt.Sprintf("%s/%s/pull/%d", s.srv.URL, repo.FullName(), iss.Number)
	delete(m, "pull_request")
	return m
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request, repo *Repo) {
	q := r.URL.Query()
	out := []map[string]any{}
	for _, n := range sortedIssueNumbers(repo) {
		iss := repo.Issues[n]
		if iss.PR == nil {
			continue
		}
		if st := q.Get("state"); st != "" && st != "all" && st != iss.State {
			continue
		}
		if b := q.Get("base"); b != "" && b != iss.PR.Base {
			continue
		}
		if h := q.Get("head"); h != "" && h != repo.Owner+":"+iss.PR.Head {
			continue
		}
		out = append(out, s.pullJSON(repo, iss))
	}
	writeJSON(w, http.StatusOK, out)
}

func sortedIssueNumbers(repo *Repo) []int {
	var nums []int
	for n := range repo.Issues {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	return nums
}

func (s *Server) createPull(w http.ResponseWriter, r *http.Request, repo *Repo) {
	var body struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": err.Error()})
		return
	}
	head := branchSHA(repo.GitDir, body.Head)
	if head == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}}})
		return
	}
	for _, iss := range repo.Issues {
		if iss.PR != nil && iss.PR.Head == body.Head && iss.State == "open" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + repo.Owner + ":" + body.Head + "."}}})
			return
		}
	}
	n := repo.nextNumber
	repo.nextNumber++
	iss := &Issue{Number: n, Title: body.Title, Body: body.Body, User: AppLogin, State: "open",
		PR: &PullRequest{Head: body.Head, Base: body.Base, HeadSHA: head, Draft: body.Draft}}
	repo.Issues[n] = iss
	writeJSON(w, http.StatusCreated, s.pullJSON(repo, iss))
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if sha := branchSHA(repo.GitDir, iss.PR.Head); sha != "" && iss.PR.HeadRepo == "" {
		iss.PR.HeadSHA = sha
	}
	writeJSON(w, http.StatusOK, s.pullJSON(repo, iss))
}

func (s *Server) editPull(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var body struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
	}
	if iss == nil || iss.PR == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if body.Title != nil {
		iss.Title = *body.Title
	}
	if body.Body != nil {
		iss.Body = *body.Body
	}
	writeJSON(w, http.StatusOK, s.pullJSON(repo, iss))
}

func (s *Server) updateBranch(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	iss.PR.UpdateBranchCalls++
	if iss.PR.UpdateBranchFails {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "merge conflict between base and head"})
		return
	}
	// As GitHub does: merge the base into the head branch, or refuse when
	// the two conflict.
	if err := mergeBase(repo, iss.PR.Head, iss.PR.Base); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "merge conflict between base and head"})
		return
	}
	s.notify()
	writeJSON(w, http.StatusAccepted, map[string]string{"message": "Updating pull request branch.", "url": ""})
}

// mergeBase merges branch base into branch head in the bare repository
// with a merge commit, like the update-branch API; nothing when head
// already holds base, or when a branch has no commits in the fake (a
// scenario's PR that names a branch it never pushed). It fails on a
// conflict and leaves head as it was.
func mergeBase(repo *Repo, head, base string) error {
	git := func(args ...string) (string, error) {
		out, err := exec.Command(mustGit(), append([]string{"--git-dir", repo.GitDir}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	headSHA, herr := git("rev-parse", "--verify", "refs/heads/"+head)
	baseSHA, berr := git("rev-parse", "--verify", "refs/heads/"+base)
	if herr != nil || berr != nil {
		return nil
	}
	if exec.Command(mustGit(), "--git-dir", repo.GitDir, "merge-base", "--is-ancestor", baseSHA, headSHA).Run() == nil {
		return nil
	}
	tree, err := git("merge-tree", "--write-tree", headSHA, baseSHA)
	if err != nil {
		return fmt.Errorf("merge %s into %s: conflict", base, head)
	}
	cmd := exec.Command(mustGit(), "--git-dir", repo.GitDir, "commit-tree", strings.Fields(tree)[0], "-p", headSHA, "-p", baseSHA,
		"-m", fmt.Sprintf("Merge branch '%s' into %s", base, head))
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=GitHub", "GIT_AUTHOR_EMAIL=noreply@github.com",
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com")
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	_, err = git("update-ref", "refs/heads/"+head, strings.TrimSpace(string(out)), headSHA)
	return err
}

func (s *Server) requestReviewers(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var body struct {
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	if iss == nil || iss.PR == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "bad request"})
		return
	}
	iss.PR.Reviewers = append(iss.PR.Reviewers, body.Reviewers...)
	for _, t := range body.TeamReviewers {
		iss.PR.Reviewers = append(iss.PR.Reviewers, "team:"+t)
	}
	writeJSON(w, http.StatusCreated, s.pullJSON(repo, iss))
}

func (s *Server) listReviewComments(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := []map[string]any{}
	for _, c := range iss.PR.ReviewComments {
		out = append(out, s.reviewCommentJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// AddReviewComment records an inline review comment of review reviewID on
// a PR and returns its id.
func (s *Server) AddReviewComment(fullName string, number int, reviewID int64, user, path string, line int, body string) int64 {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	r.Issues[number].PR.ReviewComments = append(r.Issues[number].PR.ReviewComments, &ReviewComment{
		Comment: Comment{ID: s.nextID, User: user, Body: body, CreatedAt: time.Now()}, ReviewID: reviewID, Path: path, Line: line})
	return s.nextID
}

func (s *Server) reviewCommentJSON(c *ReviewComment) map[string]any {
	return map[string]any{"id": c.ID, "body": c.Body, "user": s.user(c.User), "path": c.Path, "line": c.Line,
		"pull_request_review_id": c.ReviewID, "diff_hunk": "@@ -1 +1 @@", "created_at": c.CreatedAt.UTC().Format(time.RFC3339),
		"in_reply_to_id": c.InReplyTo, "commit_id": c.CommitID}
}

// ReviewComment is an inline comment of a review.
type ReviewComment struct {
	Comment
	ReviewID int64
	Path     string
	Line     int
	// InReplyTo is the thread's first comment when this one is a reply.
	InReplyTo int64
	// CommitID is the commit the comment's review was of.
	CommitID string
}

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request, repo *Repo) {
	var body checkRunBody
	if err := decodeBody(r, &body); err != nil || body.Name == "" || body.HeadSHA == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "name and head_sha are required"})
		return
	}
	s.nextID++
	c := &CheckRun{ID: s.nextID, Name: body.Name, HeadSHA: body.HeadSHA, Status: "queued", App: AppSlug}
	body.apply(c)
	repo.CheckRuns[c.ID] = c
	writeJSON(w, http.StatusCreated, c.json())
}

// listCheckRuns lists a commit's check runs (by SHA), filtered by name.
func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request, repo *Repo) {
	list := []map[string]any{}
	ids := slices.Sorted(maps.Keys(repo.CheckRuns))
	for _, id := range ids {
		c := repo.CheckRuns[id]
		if c.HeadSHA == r.PathValue("ref") && (r.URL.Query().Get("check_name") == "" || c.Name == r.URL.Query().Get("check_name")) {
			list = append(list, c.json())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "check_runs": list})
}

func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c := repo.CheckRuns[id]
	var body checkRunBody
	if c == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	c.Updates++
	body.apply(c)
	writeJSON(w, http.StatusOK, c.json())
}

type checkRunBody struct {
	Name       string `json:"name"`
	HeadSHA    string `json:"head_sha"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	DetailsURL string `json:"details_url"`
	ExternalID string `json:"external_id"`
	Output     *struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
		Text    string `json:"text"`
		// Annotations are added to the run's, as GitHub does (at most 50
		// a request).
		Annotations []struct {
			Path        string `json:"path"`
			StartLine   int    `json:"start_line"`
			StartColumn int    `json:"start_column"`
			Level       string `json:"annotation_level"`
			Title       string `json:"title"`
			Message     string `json:"message"`
		} `json:"annotations"`
	} `json:"output"`
}

func (b checkRunBody) apply(c *CheckRun) {
	if b.Status != "" {
		c.Status = b.Status
	}
	if b.Conclusion != "" {
		c.Conclusion = b.Conclusion
		c.Status = "completed"
	}
	if b.Output != nil {
		c.Title, c.Summary, c.Text = b.Output.Title, b.Output.Summary, b.Output.Text
		for _, a := range b.Output.Annotations {
			c.Annotations = append(c.Annotations, Annotation{Path: a.Path, Line: a.StartLine, Column: a.StartColumn, Level: a.Level, Title: a.Title, Message: a.Message})
		}
	}
	if b.DetailsURL != "" {
		c.DetailsURL = b.DetailsURL
	}
	if b.ExternalID != "" {
		c.ExternalID = b.ExternalID
	}
}

func (c *CheckRun) json() map[string]any {
	m := map[string]any{"id": c.ID, "name": c.Name, "head_sha": c.HeadSHA, "status": c.Status,
		"external_id": c.ExternalID, "details_url": c.DetailsURL, "output": c.output(),
		"app": map[string]any{"slug": c.App, "name": c.App}, "check_suite": map[string]any{"id": c.SuiteID}}
	if c.Conclusion != "" {
		m["conclusion"] = c.Conclusion
	}
	return m
}

// serveGit runs git http-backend for /git/<owner>/<repo>.git/..., with
// the token sent as basic auth the way git sends it: fetches need a live
// token for the repository with contents read or write, pushes write
// (gitAccess).
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/git/")
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 || !strings.HasSuffix(parts[1], ".git") {
		http.NotFound(w, r)
		return
	}
	fullName := parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
	s.mu.Lock()
	repo := s.repos[fullName]
	_, pass, ok := r.BasicAuth()
	tok := s.tokens[pass]
	s.mu.Unlock()
	if repo == nil {
		http.NotFound(w, r)
		return
	}
	if !ok {
		tok = nil
	}
	push := strings.Contains(r.URL.RawQuery, "git-receive-pack") || strings.HasSuffix(r.URL.Path, "git-receive-pack")
	s.mu.Lock()
	allowed := s.gitAccess(w, repo, tok, push)
	if allowed && push {
		s.gitPushes++
	}
	s.mu.Unlock()
	if !allowed {
		return
	}
	if !push {
		s.syncPullRefs(repo)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + parts[0] + "/" + parts[1] + "/" + parts[2]
	s.gitBackend.ServeHTTP(w, r2)
	if r.Method == http.MethodPost {
		s.mu.Lock()
		s.notify()
		s.mu.Unlock()
	}
}

func mustGit() string {
	p, err := exec.LookPath("git")
	if err != nil {
		return "/usr/bin/git"
	}
	return p
}
