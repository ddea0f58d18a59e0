package hubtest

import (
	"context"
	"io"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// commitCI is what the repository's own CI says about one commit, in
// memory: other apps' check runs (Actions jobs among them) with their
// annotations, jobs and logs, and the commit statuses.
type commitCI struct {
	runs        []*github.CheckRun
	statuses    []*github.RepoStatus
	annotations map[int64][]*github.CheckRunAnnotation
	jobs        map[int64]*github.WorkflowJob
	logs        map[int64]string
}

// ciOf is sha's CI, made on first use; callers hold the hub's lock.
func (r *Repo) ciOf(sha string) *commitCI {
	if r.ci == nil {
		r.ci = map[string]*commitCI{}
	}
	c, ok := r.ci[sha]
	if !ok {
		c = &commitCI{annotations: map[int64][]*github.CheckRunAnnotation{}, jobs: map[int64]*github.WorkflowJob{}, logs: map[int64]string{}}
		r.ci[sha] = c
	}
	return c
}

// addActionsFailure makes an Actions job fail on sha: its check run, the
// job with its failing step, an annotation and its log.
func (r *Repo) AddActionsFailure(sha, name, log string) int64 {
	defer r.lock()()
	id := r.h.id()
	c := r.ciOf(sha)
	c.runs = append(c.runs, &github.CheckRun{ID: &id, Name: &name, HeadSHA: &sha, Status: github.String("completed"),
		Conclusion: github.String("failure"), App: &github.App{Slug: github.String("github-actions")},
		Output: &github.CheckRunOutput{Title: github.String(name + " failed"), AnnotationsCount: github.Int(1)}})
	c.annotations[id] = []*github.CheckRunAnnotation{{Path: github.String("greet.txt"), StartLine: github.Int(1),
		AnnotationLevel: github.String("failure"), Message: github.String("Process completed with exit code 1.")}}
	c.jobs[id] = &github.WorkflowJob{ID: &id, RunID: &id, Name: &name, WorkflowName: github.String("CI"),
		Steps: []*github.TaskStep{{Name: github.String("Checkout"), Conclusion: github.String("success")}, {Name: github.String("Test"), Conclusion: github.String("failure")}}}
	c.logs[id] = log
	return id
}

// addCheck adds another app's completed check run on sha.
func (r *Repo) AddCheck(sha, name, status, conclusion string) {
	defer r.lock()()
	id := r.h.id()
	c := r.ciOf(sha)
	run := &github.CheckRun{ID: &id, Name: &name, HeadSHA: &sha, Status: &status, App: &github.App{Slug: github.String("other-ci")}}
	if conclusion != "" {
		run.Conclusion = &conclusion
	}
	c.runs = append(c.runs, run)
}

// addStatus adds a commit status on sha.
func (r *Repo) AddStatus(sha, context, state string) {
	defer r.lock()()
	c := r.ciOf(sha)
	c.statuses = append(c.statuses, &github.RepoStatus{Context: &context, State: &state, Description: github.String(context + " says " + state)})
}

// headOf reads a heads/<branch> ref as its commit, as GitHub does;
// callers hold the lock.
func (r *Repo) HeadOf(ref string) string {
	if strings.HasPrefix(ref, "heads/") {
		return r.refs[ref]
	}
	return ref
}

func (r *Repo) CheckRunsOn(_ context.Context, ref string) ([]*github.CheckRun, error) {
	defer r.lock()()
	ref = r.HeadOf(ref)
	var out []*github.CheckRun
	for _, c := range r.checkRuns {
		if c.GetHeadSHA() == ref {
			out = append(out, c)
		}
	}
	return append(out, r.ciOf(ref).runs...), nil
}

func (r *Repo) Statuses(_ context.Context, ref string) ([]*github.RepoStatus, error) {
	defer r.lock()()
	return r.ciOf(r.HeadOf(ref)).statuses, nil
}

func (r *Repo) Annotations(_ context.Context, id int64) ([]*github.CheckRunAnnotation, error) {
	defer r.lock()()
	for _, c := range r.ci {
		if a, ok := c.annotations[id]; ok {
			return a, nil
		}
	}
	return nil, nil
}

func (r *Repo) WorkflowJob(_ context.Context, id int64) (*github.WorkflowJob, error) {
	defer r.lock()()
	for _, c := range r.ci {
		if j, ok := c.jobs[id]; ok {
			return j, nil
		}
	}
	return nil, hub.ErrNotFound
}

// WorkflowRun is the run of the job of the same id (addActionsFailure),
// on the repository's own head.
func (r *Repo) WorkflowRun(_ context.Context, id int64) (*github.WorkflowRun, error) {
	defer r.lock()()
	for _, c := range r.ci {
		if _, ok := c.jobs[id]; ok {
			return &github.WorkflowRun{ID: &id, HeadRepository: &github.Repository{FullName: github.String(r.FullName())}}, nil
		}
	}
	return nil, hub.ErrNotFound
}

func (r *Repo) JobLog(_ context.Context, id int64, read func(io.Reader) error) error {
	r.h.mu.Lock()
	var log string
	var found bool
	for _, c := range r.ci {
		if l, ok := c.logs[id]; ok {
			log, found = l, true
		}
	}
	r.h.mu.Unlock()
	if !found {
		return hub.ErrNotFound
	}
	return read(strings.NewReader(log))
}

func (r *Repo) BodyHTML(_ context.Context, ref hub.BodyRef) (hub.Rendered, error) {
	defer r.lock()()
	out := hub.Rendered{HTML: r.html[ref]}
	if ref.Kind == hub.BodyIssue {
		if is, err := r.issue(ref.Number); err == nil {
			out.Title, out.Body = is.title, is.body
		}
	}
	return out, nil
}
