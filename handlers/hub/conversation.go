package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/appconfig"
)

// goConversation is the Conversation of goRepo: the repository, its
// .sandbox.yml, and issues and pull requests as threads.
type goConversation struct {
	*repoClient
	// loader reads .sandbox.yml (goHub's, shared by every repository).
	loader *appconfig.Loader
}

func (r *goConversation) Repository(ctx context.Context) (*github.Repository, error) {
	repo, resp, err := r.c.Repositories.Get(ctx, r.owner, r.name)
	if err != nil {
		return nil, fmt.Errorf("read repository %s: %w", r.FullName(), status404(resp, err))
	}
	return repo, nil
}

func (r *goConversation) ConfigFile(ctx context.Context, ref string) (ConfigFile, error) {
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

func (r *goConversation) Issue(ctx context.Context, number int) (*github.Issue, error) {
	issue, resp, err := r.c.Issues.Get(ctx, r.owner, r.name, number)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.at(number), status404(resp, err))
	}
	return issue, nil
}

func (r *goConversation) Comments(ctx context.Context, number int) ([]*github.IssueComment, error) {
	return listAll("comments of "+r.at(number), func(opt github.ListOptions) ([]*github.IssueComment, *github.Response, error) {
		return r.c.Issues.ListComments(ctx, r.owner, r.name, number, &github.IssueListCommentsOptions{ListOptions: opt})
	})
}

func (r *goConversation) Comment(ctx context.Context, number int, body string) (*github.IssueComment, error) {
	c, _, err := r.c.Issues.CreateComment(ctx, r.owner, r.name, number, &github.IssueComment{Body: &body})
	if err != nil {
		return nil, fmt.Errorf("comment on %s: %w", r.at(number), err)
	}
	return c, nil
}

func (r *goConversation) EditComment(ctx context.Context, id int64, body string) error {
	if _, _, err := r.c.Issues.EditComment(ctx, r.owner, r.name, id, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("edit comment %d in %s: %w", id, r.FullName(), err)
	}
	return nil
}

func (r *goConversation) React(ctx context.Context, number int, commentID int64, content string) error {
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

func (r *goConversation) AddLabels(ctx context.Context, number int, labels ...string) error {
	if _, _, err := r.c.Issues.AddLabelsToIssue(ctx, r.owner, r.name, number, labels); err != nil {
		return fmt.Errorf("add labels %v to %s: %w", labels, r.at(number), err)
	}
	return nil
}

func (r *goConversation) RemoveLabel(ctx context.Context, number int, label string) error {
	if _, err := r.c.Issues.RemoveLabelForIssue(ctx, r.owner, r.name, number, label); err != nil {
		return fmt.Errorf("remove label %s from %s: %w", label, r.at(number), err)
	}
	return nil
}

func (r *goConversation) CreateLabel(ctx context.Context, name, color, description string) error {
	_, resp, err := r.c.Issues.CreateLabel(ctx, r.owner, r.name, &github.Label{Name: &name, Color: &color, Description: &description})
	if err != nil && (resp == nil || resp.StatusCode != http.StatusUnprocessableEntity) { // 422: it exists
		return fmt.Errorf("create label %q in %s: %w", name, r.FullName(), err)
	}
	return nil
}

// BodyHTML asks for the text with the full media type, whose body_html
// is GitHub's rendering.
func (r *goConversation) BodyHTML(ctx context.Context, ref BodyRef) (Rendered, error) {
	var u string
	switch ref.Kind {
	case BodyIssue:
		u = fmt.Sprintf("repos/%s/%s/issues/%d", r.owner, r.name, ref.Number)
	case BodyComment:
		u = fmt.Sprintf("repos/%s/%s/issues/comments/%d", r.owner, r.name, ref.ID)
	case BodyReview:
		u = fmt.Sprintf("repos/%s/%s/pulls/%d/reviews/%d", r.owner, r.name, ref.Number, ref.ID)
	case BodyReviewComment:
		u = fmt.Sprintf("repos/%s/%s/pulls/comments/%d", r.owner, r.name, ref.ID)
	default:
		return Rendered{}, fmt.Errorf("no rendered text of a %q", ref.Kind)
	}
	req, err := r.c.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return Rendered{}, err
	}
	req.Header.Set("Accept", "application/vnd.github.full+json")
	var v struct {
		Title    string `json:"title"`
		Body     string `json:"body"`
		BodyHTML string `json:"body_html"`
	}
	if resp, err := r.c.Do(ctx, req, &v); err != nil {
		return Rendered{}, fmt.Errorf("read the rendered %s of %s: %w", ref.Kind, r.FullName(), status404(resp, err))
	}
	return Rendered{Title: v.Title, Body: v.Body, HTML: v.BodyHTML}, nil
}

// goPeople is the People of goRepo: who may drive the bot.
type goPeople struct{ *repoClient }

func (r *goPeople) Permission(ctx context.Context, login string) (string, error) {
	perm, _, err := r.c.Repositories.GetPermissionLevel(ctx, r.owner, r.name, login)
	if err != nil {
		return "", fmt.Errorf("read %s's permission on %s: %w", login, r.FullName(), err)
	}
	return perm.GetPermission(), nil
}

func (r *goPeople) TeamMember(ctx context.Context, team, login string) (bool, error) {
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
