package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/appconfig"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// goHub is the seam over go-github. Its clients come from the core's
// ClientCreator, which the server wraps in its rate limiter (app's
// githubPacer), so every call here is paced below GitHub's limits.
type goHub struct {
	c *core
	// download fetches what the API redirects to elsewhere (an Actions
	// job's log), without the installation's credential.
	download *http.Client
	// loader reads .sandbox.yml. go-githubapp's owner default is off: it
	// only replaces a missing repository file, while the org's file is a
	// layer beneath the repository's (loadConfig reads both).
	loader *appconfig.Loader
}

func newGoHub(c *core) *goHub {
	return &goHub{c: c, loader: appconfig.NewLoader([]string{sandboxcfg.FileName}, appconfig.WithOwnerDefault("", nil)),
		download: &http.Client{Timeout: downloadTimeout}}
}

func (h *goHub) Repo(installation int64, fullName string) (GitHub, error) {
	client, err := h.c.ClientCreator.NewInstallationClient(installation)
	if err != nil {
		return nil, fmt.Errorf("client of installation %d: %w", installation, err)
	}
	owner, name, _ := strings.Cut(fullName, "/")
	return &goRepo{c: client, owner: owner, name: name, loader: h.loader, download: h.download}, nil
}

func (h *goHub) AppSlug(ctx context.Context) (string, error) {
	app, err := h.c.ClientCreator.NewAppClient()
	if err != nil {
		return "", fmt.Errorf("create app client: %w", err)
	}
	a, _, err := app.Apps.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("GET /app with the App's JWT: %w", err)
	}
	return a.GetSlug(), nil
}

func (h *goHub) MintToken(ctx context.Context, installation int64, repo, contents string) (string, time.Time, error) {
	app, err := h.c.ClientCreator.NewAppClient()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("create app client: %w", err)
	}
	tok, _, err := app.Apps.CreateInstallationToken(ctx, installation, &github.InstallationTokenOptions{
		Repositories: []string{repo},
		Permissions:  &github.InstallationPermissions{Contents: github.String(contents)},
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint contents:%s token for installation %d, repo %s: %w", contents, installation, repo, err)
	}
	return tok.GetToken(), tok.GetExpiresAt().Time, nil
}

// revokeAttempts and revokeBackoff bound the retries of one revocation: a
// token that cannot be revoked expires within the hour anyway, and posting
// the run's result must not wait on it for long.
const (
	revokeAttempts = 3
	revokeBackoff  = 250 * time.Millisecond
)

// RevokeToken uses GitHub's DELETE /installation/token, which a token may
// only do for itself. A 401 means the token is already dead.
func (h *goHub) RevokeToken(ctx context.Context, token string) error {
	client, err := h.c.ClientCreator.NewTokenClient(token)
	if err != nil {
		return fmt.Errorf("create client for revocation: %w", err)
	}
	var last error
	for attempt := 1; attempt <= revokeAttempts; attempt++ {
		resp, err := client.Apps.RevokeInstallationToken(ctx)
		if err == nil || (resp != nil && resp.StatusCode == http.StatusUnauthorized) {
			return nil
		}
		last = err
		if resp != nil && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			break // GitHub will answer the same again
		}
		if attempt == revokeAttempts || !pause(ctx, revokeBackoff*time.Duration(attempt*attempt)) {
			break
		}
	}
	if ctx.Err() != nil {
		last = errors.Join(last, ctx.Err())
	}
	return fmt.Errorf("revoke installation token (%d attempts): %w", revokeAttempts, last)
}

// goRepo is one repository through an installation's client.
type goRepo struct {
	c           *github.Client
	owner, name string
	loader      *appconfig.Loader
	download    *http.Client
}

func (r *goRepo) FullName() string { return r.owner + "/" + r.name }

// at names an issue or PR in errors.
func (r *goRepo) at(number int) string { return fmt.Sprintf("%s/%s#%d", r.owner, r.name, number) }

// status404 marks a 404 answer as ErrNotFound.
func status404(resp *github.Response, err error) error {
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func (r *goRepo) Repository(ctx context.Context) (*github.Repository, error) {
	repo, resp, err := r.c.Repositories.Get(ctx, r.owner, r.name)
	if err != nil {
		return nil, fmt.Errorf("read repository %s: %w", r.FullName(), status404(resp, err))
	}
	return repo, nil
}

func (r *goRepo) ConfigFile(ctx context.Context, ref string) (ConfigFile, error) {
	c, err := r.loader.LoadConfig(ctx, r.c, r.owner, r.name, ref)
	f := ConfigFile{Source: strings.TrimSuffix(c.Source, "@"), Path: c.Path, Content: c.Content}
	if err != nil {
		return f, err
	}
	if c.IsUndefined() {
		return ConfigFile{Source: r.FullName()}, nil
	}
	f.Found = true
	return f, nil
}

func (r *goRepo) Issue(ctx context.Context, number int) (*github.Issue, error) {
	issue, resp, err := r.c.Issues.Get(ctx, r.owner, r.name, number)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.at(number), status404(resp, err))
	}
	return issue, nil
}

func (r *goRepo) Comments(ctx context.Context, number int) ([]*github.IssueComment, error) {
	return listAll("comments of "+r.at(number), func(opt github.ListOptions) ([]*github.IssueComment, *github.Response, error) {
		return r.c.Issues.ListComments(ctx, r.owner, r.name, number, &github.IssueListCommentsOptions{ListOptions: opt})
	})
}

func (r *goRepo) Comment(ctx context.Context, number int, body string) (*github.IssueComment, error) {
	c, _, err := r.c.Issues.CreateComment(ctx, r.owner, r.name, number, &github.IssueComment{Body: &body})
	if err != nil {
		return nil, fmt.Errorf("comment on %s: %w", r.at(number), err)
	}
	return c, nil
}

func (r *goRepo) EditComment(ctx context.Context, id int64, body string) error {
	if _, _, err := r.c.Issues.EditComment(ctx, r.owner, r.name, id, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("edit comment %d in %s: %w", id, r.FullName(), err)
	}
	return nil
}

func (r *goRepo) React(ctx context.Context, number int, commentID int64, content string) error {
	var err error
	if commentID != 0 {
		_, _, err = r.c.Reactions.CreateIssueCommentReaction(ctx, r.owner, r.name, commentID, content)
	} else {
		_, _, err = r.c.Reactions.CreateIssueReaction(ctx, r.owner, r.name, number, content)
	}
	if err != nil {
		return fmt.Errorf("react %s on %s: %w", content, r.at(number), err)
	}
	return nil
}

func (r *goRepo) AddLabels(ctx context.Context, number int, labels ...string) error {
	if _, _, err := r.c.Issues.AddLabelsToIssue(ctx, r.owner, r.name, number, labels); err != nil {
		return fmt.Errorf("add labels %v to %s: %w", labels, r.at(number), err)
	}
	return nil
}

func (r *goRepo) RemoveLabel(ctx context.Context, number int, label string) error {
	if _, err := r.c.Issues.RemoveLabelForIssue(ctx, r.owner, r.name, number, label); err != nil {
		return fmt.Errorf("remove label %s from %s: %w", label, r.at(number), err)
	}
	return nil
}

func (r *goRepo) CreateLabel(ctx context.Context, name, color, description string) error {
	_, resp, err := r.c.Issues.CreateLabel(ctx, r.owner, r.name, &github.Label{Name: &name, Color: &color, Description: &description})
	if err != nil && (resp == nil || resp.StatusCode != http.StatusUnprocessableEntity) { // 422: it exists
		return fmt.Errorf("create label %q in %s: %w", name, r.FullName(), err)
	}
	return nil
}

func (r *goRepo) Permission(ctx context.Context, login string) (string, error) {
	perm, _, err := r.c.Repositories.GetPermissionLevel(ctx, r.owner, r.name, login)
	if err != nil {
		return "", fmt.Errorf("read %s's permission on %s: %w", login, r.FullName(), err)
	}
	return perm.GetPermission(), nil
}

func (r *goRepo) TeamMember(ctx context.Context, team, login string) (bool, error) {
	org, slug, _ := strings.Cut(team, "/")
	m, resp, err := r.c.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return false, nil
		}
		return false, fmt.Errorf("read %s's membership of %s: %w", login, team, err)
	}
	return m.GetState() == "active", nil
}

func (r *goRepo) PullRequest(ctx context.Context, number int) (*github.PullRequest, error) {
	pr, resp, err := r.c.PullRequests.Get(ctx, r.owner, r.name, number)
	if err != nil {
		return nil, fmt.Errorf("read PR %s: %w", r.at(number), status404(resp, err))
	}
	return pr, nil
}

func (r *goRepo) OpenPullRequests(ctx context.Context, head, base string) ([]*github.PullRequest, error) {
	prs, _, err := r.c.PullRequests.List(ctx, r.owner, r.name, &github.PullRequestListOptions{
		State: "open", Head: head, Base: base, ListOptions: github.ListOptions{PerPage: 100},
	})
	if err != nil {
		return nil, fmt.Errorf("list open PRs of %s (head %q, base %q): %w", r.FullName(), head, base, err)
	}
	return prs, nil
}

func (r *goRepo) CreatePullRequest(ctx context.Context, pr *github.NewPullRequest) (*github.PullRequest, error) {
	out, _, err := r.c.PullRequests.Create(ctx, r.owner, r.name, pr)
	if err != nil {
		return nil, fmt.Errorf("open PR %s -> %s in %s: %w", pr.GetHead(), pr.GetBase(), r.FullName(), err)
	}
	return out, nil
}

func (r *goRepo) EditPullRequestBody(ctx context.Context, number int, body string) (*github.PullRequest, error) {
	pr, _, err := r.c.PullRequests.Edit(ctx, r.owner, r.name, number, &github.PullRequest{Body: &body})
	if err != nil {
		return nil, fmt.Errorf("update the body of PR %s: %w", r.at(number), err)
	}
	return pr, nil
}

func (r *goRepo) RequestReviewers(ctx context.Context, number int, users, teams []string) error {
	if _, _, err := r.c.PullRequests.RequestReviewers(ctx, r.owner, r.name, number, github.ReviewersRequest{Reviewers: users, TeamReviewers: teams}); err != nil {
		return fmt.Errorf("request reviewers on %s: %w", r.at(number), err)
	}
	return nil
}

func (r *goRepo) UpdateBranch(ctx context.Context, number int) error {
	_, _, err := r.c.PullRequests.UpdateBranch(ctx, r.owner, r.name, number, nil)
	// 202 is how update-branch says it scheduled the merge; go-github
	// reports it as an AcceptedError.
	var accepted *github.AcceptedError
	if err == nil || errors.As(err, &accepted) {
		return nil
	}
	return fmt.Errorf("update the branch of PR %s: %w", r.at(number), err)
}

func (r *goRepo) Reviews(ctx context.Context, number int) ([]*github.PullRequestReview, error) {
	return listAll("reviews of "+r.at(number), func(opt github.ListOptions) ([]*github.PullRequestReview, *github.Response, error) {
		return r.c.PullRequests.ListReviews(ctx, r.owner, r.name, number, &opt)
	})
}

func (r *goRepo) ReviewComments(ctx context.Context, number int) ([]*github.PullRequestComment, error) {
	all, err := listAll("review comments of "+r.at(number), func(opt github.ListOptions) ([]*github.PullRequestComment, *github.Response, error) {
		return r.c.PullRequests.ListComments(ctx, r.owner, r.name, number, &github.PullRequestListCommentsOptions{ListOptions: opt})
	})
	slices.SortStableFunc(all, func(a, b *github.PullRequestComment) int { return cmp.Compare(a.GetID(), b.GetID()) })
	return all, err
}

func (r *goRepo) ReplyToReviewComment(ctx context.Context, number int, to int64, body string) error {
	if _, _, err := r.c.PullRequests.CreateCommentInReplyTo(ctx, r.owner, r.name, number, body, to); err != nil {
		return fmt.Errorf("reply on review comment %d of %s: %w", to, r.at(number), err)
	}
	return nil
}

func (r *goRepo) CheckRuns(ctx context.Context, sha, name string) ([]*github.CheckRun, error) {
	list, _, err := r.c.Checks.ListCheckRunsForRef(ctx, r.owner, r.name, sha, &github.ListCheckRunsOptions{CheckName: &name})
	if err != nil {
		return nil, fmt.Errorf("list check runs of %s on %.12s: %w", r.FullName(), sha, err)
	}
	return list.CheckRuns, nil
}

func (r *goRepo) CreateCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (*github.CheckRun, error) {
	cr, _, err := r.c.Checks.CreateCheckRun(ctx, r.owner, r.name, opts)
	if err != nil {
		return nil, fmt.Errorf("create check run on %.12s in %s: %w", opts.HeadSHA, r.FullName(), err)
	}
	return cr, nil
}

func (r *goRepo) UpdateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error {
	if _, _, err := r.c.Checks.UpdateCheckRun(ctx, r.owner, r.name, id, opts); err != nil {
		return fmt.Errorf("update check run %d in %s: %w", id, r.FullName(), err)
	}
	return nil
}

func (r *goRepo) RefCommit(ctx context.Context, ref string) (string, string, error) {
	gr, resp, err := r.c.Git.GetRef(ctx, r.owner, r.name, ref)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return "", "", nil
		}
		return "", "", fmt.Errorf("read %s: %w", ref, err)
	}
	sha := gr.GetObject().GetSHA()
	c, _, err := r.c.Git.GetCommit(ctx, r.owner, r.name, sha)
	if err != nil {
		return "", "", fmt.Errorf("read commit %s of %s: %w", sha, ref, err)
	}
	return sha, c.GetTree().GetSHA(), nil
}

func (r *goRepo) CreateBlob(ctx context.Context, content []byte) (string, error) {
	b, _, err := r.c.Git.CreateBlob(ctx, r.owner, r.name, &github.Blob{Content: github.String(encodeBase64(content)), Encoding: github.String("base64")})
	if err != nil {
		return "", err
	}
	return b.GetSHA(), nil
}

func (r *goRepo) CreateTree(ctx context.Context, entries []*github.TreeEntry) (string, error) {
	t, _, err := r.c.Git.CreateTree(ctx, r.owner, r.name, "", entries)
	if err != nil {
		return "", err
	}
	return t.GetSHA(), nil
}

func (r *goRepo) CreateCommit(ctx context.Context, message, tree string) (string, error) {
	c, _, err := r.c.Git.CreateCommit(ctx, r.owner, r.name, &github.Commit{Message: &message, Tree: &github.Tree{SHA: &tree}}, nil)
	if err != nil {
		return "", err
	}
	return c.GetSHA(), nil
}

func (r *goRepo) CreateRef(ctx context.Context, ref, sha string) error {
	_, resp, err := r.c.Git.CreateRef(ctx, r.owner, r.name, &github.Reference{Ref: &ref, Object: &github.GitObject{SHA: &sha}})
	if err != nil && resp != nil && resp.StatusCode == http.StatusUnprocessableEntity {
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

func (r *goRepo) UpdateRef(ctx context.Context, ref, sha string) error {
	_, _, err := r.c.Git.UpdateRef(ctx, r.owner, r.name, &github.Reference{Ref: &ref, Object: &github.GitObject{SHA: &sha}}, true)
	return err
}

// Archive follows GitHub's tarball link for sha and reads at most max
// bytes of it.
func (r *goRepo) Archive(ctx context.Context, sha string, max int64) ([]byte, error) {
	link, resp, err := r.c.Repositories.GetArchiveLink(ctx, r.owner, r.name, github.Tarball, &github.RepositoryContentGetOptions{Ref: sha}, 3)
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, status404(resp, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return nil, err
	}
	res, err := r.c.Client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("archive of %s at %s: GitHub answered %s", r.FullName(), sha, res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("archive of %s at %s: larger than %d bytes", r.FullName(), sha, max)
	}
	return b, nil
}
