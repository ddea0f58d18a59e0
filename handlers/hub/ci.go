package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/go-github/v62/github"
)

// Check runs over go-github: the bot's own (goChecks) and what the
// repository's CI says (goCI); goRepo, which holds them with the other
// parts, is in client.go.

// downloadTimeout bounds the fetch of a job's log from where GitHub
// redirects.
const downloadTimeout = 2 * time.Minute

// goChecks is the Checks of goRepo: the check runs the bot shows a run's
// progress on.
type goChecks struct{ *repoClient }

func (r *goChecks) CheckRuns(ctx context.Context, sha, name string) ([]*github.CheckRun, error) {
	list, _, err := r.c.Checks.ListCheckRunsForRef(ctx, r.owner, r.name, sha, &github.ListCheckRunsOptions{CheckName: &name})
	if err != nil {
		return nil, fmt.Errorf("list check runs of %s on %.12s: %w", r.FullName(), sha, err)
	}
	return list.CheckRuns, nil
}

func (r *goChecks) CreateCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (*github.CheckRun, error) {
	cr, _, err := r.c.Checks.CreateCheckRun(ctx, r.owner, r.name, opts)
	if err != nil {
		return nil, fmt.Errorf("create check run on %.12s in %s: %w", opts.HeadSHA, r.FullName(), err)
	}
	return cr, nil
}

func (r *goChecks) UpdateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error {
	if _, _, err := r.c.Checks.UpdateCheckRun(ctx, r.owner, r.name, id, opts); err != nil {
		return fmt.Errorf("update check run %d in %s: %w", id, r.FullName(), err)
	}
	return nil
}

// goCI is the CI of goRepo: every app's check runs and the commit
// statuses on a commit, and an Actions job's log.
type goCI struct {
	*repoClient
	// download fetches the log where GitHub redirects, without the
	// installation's credential (goHub's).
	download *http.Client
}

func (r *goCI) CheckRunsOn(ctx context.Context, ref string) ([]*github.CheckRun, error) {
	return listAll(fmt.Sprintf("check runs of %s on %.12s", r.FullName(), ref), func(opt github.ListOptions) ([]*github.CheckRun, *github.Response, error) {
		list, resp, err := r.c.Checks.ListCheckRunsForRef(ctx, r.owner, r.name, ref, &github.ListCheckRunsOptions{Filter: github.String("latest"), ListOptions: opt})
		if err != nil {
			return nil, resp, err
		}
		return list.CheckRuns, resp, nil
	})
}

func (r *goCI) Statuses(ctx context.Context, ref string) ([]*github.RepoStatus, error) {
	return listAll(fmt.Sprintf("commit statuses of %s on %.12s", r.FullName(), ref), func(opt github.ListOptions) ([]*github.RepoStatus, *github.Response, error) {
		cs, resp, err := r.c.Repositories.GetCombinedStatus(ctx, r.owner, r.name, ref, &opt)
		if err != nil {
			return nil, resp, err
		}
		return cs.Statuses, resp, nil
	})
}

func (r *goCI) Annotations(ctx context.Context, id int64) ([]*github.CheckRunAnnotation, error) {
	list, _, err := r.c.Checks.ListCheckRunAnnotations(ctx, r.owner, r.name, id, &github.ListOptions{PerPage: 100})
	if err != nil {
		return nil, fmt.Errorf("read the annotations of check run %d in %s: %w", id, r.FullName(), err)
	}
	return list, nil
}

func (r *goCI) WorkflowJob(ctx context.Context, id int64) (*github.WorkflowJob, error) {
	job, resp, err := r.c.Actions.GetWorkflowJobByID(ctx, r.owner, r.name, id)
	if err != nil {
		return nil, fmt.Errorf("read Actions job %d of %s: %w", id, r.FullName(), status404(resp, err))
	}
	return job, nil
}

func (r *goCI) WorkflowRun(ctx context.Context, id int64) (*github.WorkflowRun, error) {
	run, resp, err := r.c.Actions.GetWorkflowRunByID(ctx, r.owner, r.name, id)
	if err != nil {
		return nil, fmt.Errorf("read Actions workflow run %d of %s: %w", id, r.FullName(), status404(resp, err))
	}
	return run, nil
}

func (r *goCI) JobLog(ctx context.Context, id int64, read func(io.Reader) error) error {
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
		return fmt.Errorf("download the log of Actions job %d of %s: %w", id, r.FullName(), ScrubURLError(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("download the log of Actions job %d of %s: %s", id, r.FullName(), res.Status)
	}
	return read(res.Body)
}
