package hub

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
)

// The seam's part for routines: where the App is installed (every
// repository's .sandbox.yml may declare routines), and issues the App
// opens (Conversation.CreateIssue). goHub speaks Installations; the
// routines take it by type assertion, so the table's in-memory GitHub
// need not.

// Installations lists where the App is installed.
type Installations interface {
	Installations(ctx context.Context) ([]int64, error)
	InstallationRepos(ctx context.Context, installation int64) ([]*github.Repository, error)
}

var _ Installations = (*goHub)(nil)

func (h *goHub) Installations(ctx context.Context) ([]int64, error) {
	app, err := h.cc.NewAppClient()
	if err != nil {
		return nil, fmt.Errorf("create app client: %w", err)
	}
	insts, err := listAll("the App's installations", func(opt github.ListOptions) ([]*github.Installation, *github.Response, error) {
		return app.Apps.ListInstallations(ctx, &opt)
	})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(insts))
	for _, i := range insts {
		if i.SuspendedAt == nil {
			ids = append(ids, i.GetID())
		}
	}
	return ids, nil
}

func (h *goHub) InstallationRepos(ctx context.Context, installation int64) ([]*github.Repository, error) {
	client, err := h.cc.NewInstallationClient(installation)
	if err != nil {
		return nil, fmt.Errorf("client of installation %d: %w", installation, err)
	}
	var all []*github.Repository
	opt := github.ListOptions{PerPage: 100}
	for {
		page, resp, err := client.Apps.ListRepos(ctx, &opt)
		if err != nil {
			return nil, fmt.Errorf("list the repositories of installation %d: %w", installation, err)
		}
		all = append(all, page.Repositories...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opt.Page = resp.NextPage
	}
}

func (r *goConversation) CreateIssue(ctx context.Context, title, body string, labels []string) (*github.Issue, error) {
	iss, _, err := r.c.Issues.Create(ctx, r.owner, r.name, &github.IssueRequest{Title: &title, Body: &body, Labels: &labels})
	if err != nil {
		return nil, fmt.Errorf("open an issue in %s: %w", r.FullName(), err)
	}
	return iss, nil
}
