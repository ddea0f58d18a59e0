package handlers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/go-github/v62/github"
)

// The repository's own checks and GitHub's rendered text, over go-github
// (the rest of goRepo is github_client.go).

// downloadTimeout bounds the fetch of a job's log from where GitHub
// redirects.
const downloadTimeout = 2 * time.Minute

func (r *goRepo) CheckRunsOn(ctx context.Context, ref string) ([]*github.CheckRun, error) {
	return listAll(fmt.Sprintf("check runs of %s on %.12s", r.FullName(), ref), func(opt github.ListOptions) ([]*github.CheckRun, *github.Response, error) {
		list, resp, err := r.c.Checks.ListCheckRunsForRef(ctx, r.owner, r.name, ref, &github.ListCheckRunsOptions{Filter: github.String("latest"), ListOptions: opt})
		if err != nil {
			return nil, resp, err
		}
		return list.CheckRuns, resp, nil
	})
}

func (r *goRepo) Statuses(ctx context.Context, ref string) ([]*github.RepoStatus, error) {
	return listAll(fmt.Sprintf("commit statuses of %s on %.12s", r.FullName(), ref), func(opt github.ListOptions) ([]*github.RepoStatus, *github.Response, error) {
		cs, resp, err := r.c.Repositories.GetCombinedStatus(ctx, r.owner, r.name, ref, &opt)
		if err != nil {
			return nil, resp, err
		}
		return cs.Statuses, resp, nil
	})
}

func (r *goRepo) Annotations(ctx context.Context, id int64) ([]*github.CheckRunAnnotation, error) {
	list, _, err := r.c.Checks.ListCheckRunAnnotations(ctx, r.owner, r.name, id, &github.ListOptions{PerPage: 100})
	if err != nil {
		return nil, fmt.Errorf("read the annotations of check run %d in %s: %w", id, r.FullName(), err)
	}
	return list, nil
}

func (r *goRepo) WorkflowJob(ctx context.Context, id int64) (*github.WorkflowJob, error) {
	job, resp, err := r.c.Actions.GetWorkflowJobByID(ctx, r.owner, r.name, id)
	if err != nil {
		return nil, fmt.Errorf("read Actions job %d of %s: %w", id, r.FullName(), status404(resp, err))
	}
	return job, nil
}

func (r *goRepo) JobLog(ctx context.Context, id int64, read func(io.Reader) error) error {
	link, resp, err := r.c.Actions.GetWorkflowJobLogs(ctx, r.owner, r.name, id, 0)
	if err != nil {
		return fmt.Errorf("the log of Actions job %d of %s: %w", id, r.FullName(), status404(resp, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return err
	}
	res, err := r.download.Do(req)
	if err != nil {
		return fmt.Errorf("download the log of Actions job %d of %s: %w", id, r.FullName(), scrubURLError(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("download the log of Actions job %d of %s: %s", id, r.FullName(), res.Status)
	}
	return read(res.Body)
}

// BodyHTML asks for the text with the full media type, whose body_html
// is GitHub's rendering.
func (r *goRepo) BodyHTML(ctx context.Context, ref BodyRef) (string, error) {
	var u string
	switch ref.Kind {
	case bodyIssue:
		u = fmt.Sprintf("repos/%s/%s/issues/%d", r.owner, r.name, ref.Number)
	case bodyComment:
		u = fmt.Sprintf("repos/%s/%s/issues/comments/%d", r.owner, r.name, ref.ID)
	case bodyReview:
		u = fmt.Sprintf("repos/%s/%s/pulls/%d/reviews/%d", r.owner, r.name, ref.Number, ref.ID)
	case bodyReviewComment:
		u = fmt.Sprintf("repos/%s/%s/pulls/comments/%d", r.owner, r.name, ref.ID)
	default:
		return "", fmt.Errorf("no rendered text of a %q", ref.Kind)
	}
	req, err := r.c.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.github.full+json")
	var v struct {
		BodyHTML string `json:"body_html"`
	}
	if resp, err := r.c.Do(ctx, req, &v); err != nil {
		return "", fmt.Errorf("read the rendered %s of %s: %w", ref.Kind, r.FullName(), status404(resp, err))
	}
	return v.BodyHTML, nil
}
