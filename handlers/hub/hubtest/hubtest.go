// Package hubtest is GitHub in memory behind the seam of package hub, as
// policy-bot's pulltest is beside its pull: the lifecycle table's tests
// run the handlers on it without HTTP. The wire and the payloads are the
// scenario tests' (app/githubtest).
package hubtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// Hub is GitHub in memory, behind the seam: the table's tests run the
// handlers on it without HTTP. It keeps what the bot reads and writes
// (issues, comments, labels, pull requests, check runs, refs) and no more;
// the wire and the payloads are the scenario tests' (app/githubtest).
type Hub struct {
	mu      sync.Mutex
	slug    string
	repos   map[string]*Repo
	nextID  int64
	minted  []string
	revoked []string
	// fail makes the next call of a method ("AddLabels") fail with err,
	// as many times as it lists.
	fail map[string][]error
}

func New() *Hub {
	return &Hub{slug: "sandbox-bot", repos: map[string]*Repo{}, nextID: 1000, fail: map[string][]error{}}
}

// login is the App's bot account.
func (h *Hub) Login() string { return h.slug + "[bot]" }

func (h *Hub) id() int64 { h.nextID++; return h.nextID }

// repo is the repository fullName, made on first use.
func (h *Hub) Named(fullName string) *Repo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.repoLocked(fullName)
}

func (h *Hub) repoLocked(fullName string) *Repo {
	r, ok := h.repos[fullName]
	if !ok {
		r = &Repo{h: h, name: fullName, id: h.id(), defaultBranch: "main", issues: map[int]*issue{},
			Perms: map[string]string{}, refs: map[string]string{}, trees: map[string]string{}}
		h.repos[fullName] = r
	}
	return r
}

// failNext makes the next calls of method fail with errs, in order.
func (h *Hub) FailNext(method string, errs ...error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail[method] = append(h.fail[method], errs...)
}

// injected is the failure queued for method; callers hold h.mu.
func (h *Hub) injected(method string) error {
	if errs := h.fail[method]; len(errs) > 0 {
		h.fail[method] = errs[1:]
		return errs[0]
	}
	return nil
}

// ServerError is GitHub answering 502: a passing failure.
func ServerError() error {
	return &github.ErrorResponse{Response: &http.Response{StatusCode: http.StatusBadGateway, Request: &http.Request{Method: "POST"}}, Message: "bad gateway"}
}

func (h *Hub) Repo(_ int64, fullName string) (hub.GitHub, error) { return h.Named(fullName), nil }

func (h *Hub) AppSlug(context.Context) (string, error) { return h.slug, nil }

func (h *Hub) MintToken(_ context.Context, _ int64, repo, contents string) (string, time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tok := fmt.Sprintf("ghs_%s_%s_%d", strings.ReplaceAll(repo, "/", "_"), contents, h.id())
	h.minted = append(h.minted, tok)
	return tok, time.Now().Add(time.Hour), nil
}

func (h *Hub) RevokeToken(_ context.Context, token string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = append(h.revoked, token)
	return nil
}

// Repo is one repository in memory.
type Repo struct {
	h             *Hub
	name          string
	id            int64
	defaultBranch string
	SandboxYML    string
	issues        map[int]*issue
	Perms         map[string]string
	refs          map[string]string // ref -> commit
	trees         map[string]string // commit -> tree
	checkRuns     []*github.CheckRun
	// ci is other apps' checks by commit (ci.go).
	ci map[string]*commitCI
	// html is GitHub's rendering of a text, where a test set one.
	html map[hub.BodyRef]string
	// updates counts update-branch calls; conflict makes them fail.
	updates  int
	conflict bool
}

// issue is an issue or pull request.
type issue struct {
	number         int
	title, body    string
	author         string
	labels         []string
	comments       []*github.IssueComment
	pr             *github.PullRequest
	reviews        []*github.PullRequestReview
	reviewComments []*github.PullRequestComment
}

// EditBody replaces issue n's body by what edit makes of it.
func (r *Repo) EditBody(n int, edit func(string) string) {
	defer r.lock()()
	r.issues[n].body = edit(r.issues[n].body)
}

// SetRef points ref ("heads/main") at sha.
func (r *Repo) SetRef(ref, sha string) {
	defer r.lock()()
	r.refs[ref] = sha
}

// Updates counts the update-branch calls.
func (r *Repo) Updates() int {
	defer r.lock()()
	return r.updates
}

func (r *Repo) lock() func() { r.h.mu.Lock(); return r.h.mu.Unlock }

func (r *Repo) FullName() string { return r.name }

func (r *Repo) GitHubRepo() *github.Repository {
	owner, name, _ := strings.Cut(r.name, "/")
	return &github.Repository{ID: &r.id, Name: &name, FullName: github.String(r.name), DefaultBranch: &r.defaultBranch,
		CloneURL: github.String("https://github.example/" + r.name + ".git"), Owner: &github.User{Login: &owner}}
}

// addIssue adds an issue (or, with pr, a pull request) and returns it.
// AddIssue opens an issue by author, a pull request when pr is set, and
// returns its number.
func (r *Repo) AddIssue(author, title, body string, pr *github.PullRequest) int {
	return r.addIssue(author, title, body, pr).number
}

func (r *Repo) addIssue(author, title, body string, pr *github.PullRequest) *issue {
	defer r.lock()()
	n := len(r.issues) + 1
	is := &issue{number: n, title: title, body: body, author: author, pr: pr}
	if pr != nil {
		pr.Number = &n
	}
	r.issues[n] = is
	return is
}

// CreateIssue opens an issue as the App, labeled.
func (r *Repo) CreateIssue(ctx context.Context, title, body string, labels []string) (*github.Issue, error) {
	is := r.addIssue(r.h.Login(), title, body, nil)
	r.h.mu.Lock()
	is.labels = append(is.labels, labels...)
	r.h.mu.Unlock()
	return r.Issue(ctx, is.number)
}

// addComment adds a comment by login and returns its id.
func (r *Repo) AddComment(n int, login, body string) int64 {
	defer r.lock()()
	return r.commentLocked(n, login, body).GetID()
}

func (r *Repo) commentLocked(n int, login, body string) *github.IssueComment {
	id := r.h.id()
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	c := &github.IssueComment{ID: &id, Body: &body, User: &github.User{Login: &login, Type: &typ},
		HTMLURL:   github.String(fmt.Sprintf("https://github.example/%s/issues/%d#issuecomment-%d", r.name, n, id)),
		CreatedAt: &github.Timestamp{Time: time.Now()}}
	is := r.issues[n]
	is.comments = append(is.comments, c)
	return c
}

// labels are the labels of #n.
func (r *Repo) Labels(n int) []string {
	defer r.lock()()
	return slices.Clone(r.issues[n].labels)
}

// bodies are the bodies of the bot's comments on #n.
func (r *Repo) Bodies(n int) []string {
	defer r.lock()()
	var out []string
	for _, c := range r.issues[n].comments {
		if c.GetUser().GetLogin() == r.h.Login() {
			out = append(out, c.GetBody())
		}
	}
	return out
}

func (r *Repo) issue(n int) (*issue, error) {
	is, ok := r.issues[n]
	if !ok {
		return nil, fmt.Errorf("%s#%d: %w", r.name, n, hub.ErrNotFound)
	}
	return is, nil
}

func (r *Repo) Repository(context.Context) (*github.Repository, error) {
	defer r.lock()()
	return r.GitHubRepo(), nil
}

func (r *Repo) ConfigFile(_ context.Context, ref string) (hub.ConfigFile, error) {
	defer r.lock()()
	if r.SandboxYML == "" {
		return hub.ConfigFile{Source: r.name}, nil
	}
	src := r.name
	if ref != "" {
		src += "@" + ref
	}
	return hub.ConfigFile{Found: true, Source: src, Path: ".sandbox.yml", Content: []byte(r.SandboxYML)}, nil
}

func (r *Repo) Issue(_ context.Context, n int) (*github.Issue, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return nil, err
	}
	out := &github.Issue{Number: &is.number, Title: &is.title, Body: &is.body, User: &github.User{Login: &is.author},
		HTMLURL: github.String(fmt.Sprintf("https://github.example/%s/issues/%d", r.name, n))}
	for _, l := range is.labels {
		out.Labels = append(out.Labels, &github.Label{Name: github.String(l)})
	}
	if is.pr != nil {
		out.PullRequestLinks = &github.PullRequestLinks{URL: github.String("x")}
	}
	return out, nil
}

func (r *Repo) Comments(_ context.Context, n int) ([]*github.IssueComment, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return nil, err
	}
	return slices.Clone(is.comments), nil
}

func (r *Repo) Comment(_ context.Context, n int, body string) (*github.IssueComment, error) {
	defer r.lock()()
	if err := r.h.injected("Comment"); err != nil {
		return nil, err
	}
	if _, err := r.issue(n); err != nil {
		return nil, err
	}
	return r.commentLocked(n, r.h.Login(), body), nil
}

func (r *Repo) EditComment(_ context.Context, id int64, body string) error {
	defer r.lock()()
	if err := r.h.injected("EditComment"); err != nil {
		return err
	}
	for _, is := range r.issues {
		for _, c := range is.comments {
			if c.GetID() == id {
				c.Body = &body
				return nil
			}
		}
	}
	return fmt.Errorf("comment %d: %w", id, hub.ErrNotFound)
}

func (r *Repo) React(context.Context, int, int64, string) error { return nil }

func (r *Repo) AddLabels(_ context.Context, n int, labels ...string) error {
	defer r.lock()()
	if err := r.h.injected("AddLabels"); err != nil {
		return err
	}
	is, err := r.issue(n)
	if err != nil {
		return err
	}
	for _, l := range labels {
		if !slices.Contains(is.labels, l) {
			is.labels = append(is.labels, l)
		}
	}
	return nil
}

func (r *Repo) RemoveLabel(_ context.Context, n int, label string) error {
	defer r.lock()()
	if err := r.h.injected("RemoveLabel"); err != nil {
		return err
	}
	is, err := r.issue(n)
	if err != nil {
		return err
	}
	i := slices.Index(is.labels, label)
	if i < 0 {
		return fmt.Errorf("label %s on #%d: %w", label, n, hub.ErrNotFound)
	}
	is.labels = slices.Delete(is.labels, i, i+1)
	return nil
}

func (r *Repo) CreateLabel(context.Context, string, string, string) error { return nil }

func (r *Repo) Permission(_ context.Context, login string) (string, error) {
	defer r.lock()()
	if p, ok := r.Perms[login]; ok {
		return p, nil
	}
	return "read", nil
}

func (r *Repo) TeamMember(context.Context, string, string) (bool, error) { return false, nil }

func (r *Repo) PullRequest(_ context.Context, n int) (*github.PullRequest, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil || is.pr == nil {
		return nil, fmt.Errorf("PR %s#%d: %w", r.name, n, hub.ErrNotFound)
	}
	pr := *is.pr
	pr.Body = &is.body
	return &pr, nil
}

func (r *Repo) OpenPullRequests(_ context.Context, head, base string) ([]*github.PullRequest, error) {
	defer r.lock()()
	var out []*github.PullRequest
	for _, n := range slices.Sorted(maps.Keys(r.issues)) {
		is := r.issues[n]
		if is.pr == nil {
			continue
		}
		owner, _, _ := strings.Cut(r.name, "/")
		if head != "" && head != owner+":"+is.pr.GetHead().GetRef() || base != "" && base != is.pr.GetBase().GetRef() {
			continue
		}
		pr := *is.pr
		pr.Body = &is.body
		out = append(out, &pr)
	}
	return out, nil
}

func (r *Repo) CreatePullRequest(_ context.Context, np *github.NewPullRequest) (*github.PullRequest, error) {
	pr := r.AgentPullRequest(np.GetHead(), np.GetBase())
	is := r.addIssue(r.h.Login(), np.GetTitle(), np.GetBody(), pr)
	return r.PullRequest(context.Background(), is.number)
}

// agentPullRequest is a pull request from head in this repository, opened
// by the App.
func (r *Repo) AgentPullRequest(head, base string) *github.PullRequest {
	repo := r.GitHubRepo()
	return &github.PullRequest{User: &github.User{Login: github.String(r.h.Login())},
		Head:    &github.PullRequestBranch{Ref: &head, SHA: github.String("0123456789abcdef0123456789abcdef01234567"), Repo: repo},
		Base:    &github.PullRequestBranch{Ref: &base, Repo: repo},
		HTMLURL: github.String("https://github.example/" + r.name + "/pull/x")}
}

func (r *Repo) EditPullRequestBody(ctx context.Context, n int, body string) (*github.PullRequest, error) {
	r.h.mu.Lock()
	is, err := r.issue(n)
	if err == nil {
		is.body = body
	}
	r.h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.PullRequest(ctx, n)
}

func (r *Repo) RequestReviewers(context.Context, int, []string, []string) error { return nil }

func (r *Repo) UpdateBranch(context.Context, int) error {
	defer r.lock()()
	r.updates++
	if r.conflict {
		return fmt.Errorf("update branch: merge conflict")
	}
	return nil
}

func (r *Repo) Reviews(_ context.Context, n int) ([]*github.PullRequestReview, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return nil, err
	}
	return slices.Clone(is.reviews), nil
}

func (r *Repo) ReviewComments(_ context.Context, n int) ([]*github.PullRequestComment, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return nil, err
	}
	return slices.Clone(is.reviewComments), nil
}

func (r *Repo) ReplyToReviewComment(_ context.Context, n int, to int64, body string) error {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return err
	}
	id := r.h.id()
	is.reviewComments = append(is.reviewComments, &github.PullRequestComment{ID: &id, InReplyTo: &to, Body: &body, User: &github.User{Login: github.String(r.h.Login())}})
	return nil
}

func (r *Repo) PullFiles(context.Context, int) ([]*github.CommitFile, error) { return nil, nil }

func (r *Repo) CreateReview(_ context.Context, n int, _, body string, _ []*github.DraftReviewComment) (int64, error) {
	defer r.lock()()
	is, err := r.issue(n)
	if err != nil {
		return 0, err
	}
	id := r.h.id()
	is.reviews = append(is.reviews, &github.PullRequestReview{ID: &id, Body: &body, State: github.String("COMMENTED"), User: &github.User{Login: github.String(r.h.Login())}})
	return id, nil
}

func (r *Repo) CheckRuns(_ context.Context, sha, name string) ([]*github.CheckRun, error) {
	defer r.lock()()
	var out []*github.CheckRun
	for _, c := range r.checkRuns {
		if c.GetHeadSHA() == sha && c.GetName() == name {
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *Repo) CreateCheckRun(_ context.Context, o github.CreateCheckRunOptions) (*github.CheckRun, error) {
	defer r.lock()()
	id := r.h.id()
	c := &github.CheckRun{ID: &id, Name: &o.Name, HeadSHA: &o.HeadSHA, Status: o.Status, Conclusion: o.Conclusion, ExternalID: o.ExternalID}
	r.checkRuns = append(r.checkRuns, c)
	return c, nil
}

func (r *Repo) UpdateCheckRun(_ context.Context, id int64, o github.UpdateCheckRunOptions) error {
	defer r.lock()()
	for _, c := range r.checkRuns {
		if c.GetID() == id {
			c.Status, c.Conclusion = o.Status, o.Conclusion
			return nil
		}
	}
	return fmt.Errorf("check run %d: %w", id, hub.ErrNotFound)
}

// Archive is a tarball of the repository's .sandbox.yml, under one top
// directory as GitHub's are.
func (r *Repo) Archive(_ context.Context, sha string, _ int64) ([]byte, error) {
	defer r.lock()()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "repo-" + sha + "/.sandbox.yml", Mode: 0o644, Size: int64(len(r.SandboxYML))})
	_, _ = tw.Write([]byte(r.SandboxYML))
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes(), nil
}

func (r *Repo) RefCommit(_ context.Context, ref string) (string, string, error) {
	defer r.lock()()
	c := r.refs[ref]
	return c, r.trees[c], nil
}

func (r *Repo) CreateBlob(_ context.Context, content []byte) (string, error) {
	return fmt.Sprintf("%x", hub.GitObjectID("blob", content)), nil
}

func (r *Repo) CreateTree(_ context.Context, entries []*github.TreeEntry) (string, error) {
	defer r.lock()()
	return fmt.Sprintf("tree-%d-%d", len(entries), r.h.id()), nil
}

func (r *Repo) CreateCommit(_ context.Context, _, tree string) (string, error) {
	defer r.lock()()
	c := fmt.Sprintf("commit-%d", r.h.id())
	r.trees[c] = tree
	return c, nil
}

func (r *Repo) CreateRef(_ context.Context, ref, sha string) error {
	defer r.lock()()
	if _, ok := r.refs[ref]; ok {
		return fmt.Errorf("%s: %w", ref, hub.ErrExists)
	}
	r.refs[ref] = sha
	return nil
}

func (r *Repo) UpdateRef(_ context.Context, ref, sha string) error {
	defer r.lock()()
	r.refs[ref] = sha
	return nil
}

func (r *Repo) DeleteRef(_ context.Context, ref string) error {
	defer r.lock()()
	delete(r.refs, ref)
	return nil
}

var _ hub.Hub = (*Hub)(nil)
