package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-github/v62/github"
)

// goPullRequests is the PullRequests of goRepo: pull requests and their
// reviews.
type goPullRequests struct{ *repoClient }

func (r *goPullRequests) PullRequest(ctx context.Context, number int) (*github.PullRequest, error) {
	pr, resp, err := r.c.PullRequests.Get(ctx, r.owner, r.name, number)
	if err != nil {
		return nil, fmt.Errorf("read PR %s: %w", r.at(number), status404(resp, err))
	}
	return pr, nil
}

func (r *goPullRequests) OpenPullRequests(ctx context.Context, head, base string) ([]*github.PullRequest, error) {
	prs, _, err := r.c.PullRequests.List(ctx, r.owner, r.name, &github.PullRequestListOptions{
		State: "open", Head: head, Base: base, ListOptions: github.ListOptions{PerPage: 100},
	})
	if err != nil {
		return nil, fmt.Errorf("list open PRs of %s (head %q, base %q): %w", r.FullName(), head, base, err)
	}
	return prs, nil
}

func (r *goPullRequests) CreatePullRequest(ctx context.Context, pr *github.NewPullRequest) (*github.PullRequest, error) {
	out, _, err := r.c.PullRequests.Create(ctx, r.owner, r.name, pr)
	if err != nil {
		return nil, fmt.Errorf("open PR %s -> %s in %s: %w", pr.GetHead(), pr.GetBase(), r.FullName(), err)
	}
	return out, nil
}

func (r *goPullRequests) EditPullRequestBody(ctx context.Context, number int, body string) (*github.PullRequest, error) {
	pr, _, err := r.c.PullRequests.Edit(ctx, r.owner, r.name, number, &github.PullRequest{Body: &body})
	if err != nil {
		return nil, fmt.Errorf("update the body of PR %s: %w", r.at(number), err)
	}
	return pr, nil
}

func (r *goPullRequests) RequestReviewers(ctx context.Context, number int, users, teams []string) error {
	if _, _, err := r.c.PullRequests.RequestReviewers(ctx, r.owner, r.name, number, github.ReviewersRequest{Reviewers: users, TeamReviewers: teams}); err != nil {
		return fmt.Errorf("request reviewers on %s: %w", r.at(number), err)
	}
	return nil
}

func (r *goPullRequests) UpdateBranch(ctx context.Context, number int) error {
	_, _, err := r.c.PullRequests.UpdateBranch(ctx, r.owner, r.name, number, nil)
	// 202 is how update-branch says it scheduled the merge; go-github
	// reports it as an AcceptedError.
	var accepted *github.AcceptedError
	if err == nil || errors.As(err, &accepted) {
		return nil
	}
	return fmt.Errorf("update the branch of PR %s: %w", r.at(number), err)
}

func (r *goPullRequests) Reviews(ctx context.Context, number int) ([]*github.PullRequestReview, error) {
	return listAll("reviews of "+r.at(number), func(opt github.ListOptions) ([]*github.PullRequestReview, *github.Response, error) {
		return r.c.PullRequests.ListReviews(ctx, r.owner, r.name, number, &opt)
	})
}

func (r *goPullRequests) ReviewComments(ctx context.Context, number int) ([]*github.PullRequestComment, error) {
	all, err := listAll("review comments of "+r.at(number), func(opt github.ListOptions) ([]*github.PullRequestComment, *github.Response, error) {
		return r.c.PullRequests.ListComments(ctx, r.owner, r.name, number, &github.PullRequestListCommentsOptions{ListOptions: opt})
	})
	slices.SortStableFunc(all, func(a, b *github.PullRequestComment) int { return cmp.Compare(a.GetID(), b.GetID()) })
	return all, err
}

func (r *goPullRequests) ReplyToReviewComment(ctx context.Context, number int, to int64, body string) error {
	if _, _, err := r.c.PullRequests.CreateCommentInReplyTo(ctx, r.owner, r.name, number, body, to); err != nil {
		return fmt.Errorf("reply on review comment %d of %s: %w", to, r.at(number), err)
	}
	return nil
}

func (r *goPullRequests) PullFiles(ctx context.Context, number int) ([]*github.CommitFile, error) {
	return listAll("files of "+r.at(number), func(opt github.ListOptions) ([]*github.CommitFile, *github.Response, error) {
		return r.c.PullRequests.ListFiles(ctx, r.owner, r.name, number, &opt)
	})
}

func (r *goPullRequests) CreateReview(ctx context.Context, number int, sha, body string, comments []*github.DraftReviewComment) (int64, error) {
	rv, _, err := r.c.PullRequests.CreateReview(ctx, r.owner, r.name, number, &github.PullRequestReviewRequest{
		CommitID: &sha, Body: &body, Event: github.String("COMMENT"), Comments: comments,
	})
	if err != nil {
		return 0, fmt.Errorf("post a review on %s: %w", r.at(number), err)
	}
	return rv.GetID(), nil
}
