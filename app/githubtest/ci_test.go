package githubtest_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
)

// The fake's CI reads through go-github the way GitHub's does: a failing
// Actions job is a check run of github-actions whose id is the job's,
// with its output, annotations, steps and workflow run; its log answers
// 302 to a download URL that needs no token and only works signed; commit
// statuses combine; the check_suite webhook names the PR.
func TestCIThroughGoGitHub(t *testing.T) {
	t.Parallel()
	gh, app := newFake(t)
	ctx := context.Background()
	c := tokenClient(t, gh, mint(t, app, "alpha", "read"))
	gh.CreateBranch(repoA, "agent/t-1-x", "main")
	sha := gh.CommitFile(repoA, "agent/t-1-x", "a.txt", "a\n", "a")
	id := gh.AddCheckRun(repoA, githubtest.CheckRunSpec{Name: "test", HeadSHA: sha, HeadBranch: "agent/t-1-x", App: githubtest.ActionsApp,
		Conclusion: "failure", Title: "1 failed", Workflow: "CI", Steps: []githubtest.Step{{Name: "Run tests", Conclusion: "failure"}},
		Annotations: []githubtest.Annotation{{Path: "a.txt", Line: 1, Level: "failure", Message: "boom"}}, Log: "line\n##[error]boom\n"})
	gh.SetStatus(repoA, sha, "ci/legacy", "pending", "")
	gh.SetStatus(repoA, sha, "ci/legacy", "error", "broke")

	runs, _, err := c.Checks.ListCheckRunsForRef(ctx, "octo-org", "alpha", sha, &github.ListCheckRunsOptions{Filter: github.String("latest")})
	if err != nil || runs.GetTotal() != 1 {
		t.Fatalf("check runs %+v, %v", runs, err)
	}
	r := runs.CheckRuns[0]
	if r.GetID() != id || r.GetApp().GetSlug() != "github-actions" || r.GetConclusion() != "failure" || r.GetOutput().GetAnnotationsCount() != 1 {
		t.Errorf("check run %+v", r)
	}
	anns, _, err := c.Checks.ListCheckRunAnnotations(ctx, "octo-org", "alpha", id, nil)
	if err != nil || len(anns) != 1 || anns[0].GetMessage() != "boom" || anns[0].GetStartLine() != 1 {
		t.Errorf("annotations %+v, %v", anns, err)
	}
	job, _, err := c.Actions.GetWorkflowJobByID(ctx, "octo-org", "alpha", id)
	if err != nil || job.GetWorkflowName() != "CI" || len(job.Steps) != 1 || job.Steps[0].GetConclusion() != "failure" {
		t.Fatalf("job %+v, %v", job, err)
	}
	wr, _, err := c.Actions.GetWorkflowRunByID(ctx, "octo-org", "alpha", job.GetRunID())
	if err != nil || wr.GetName() != "CI" || wr.GetConclusion() != "failure" {
		t.Errorf("workflow run %+v, %v", wr, err)
	}
	jobs, _, err := c.Actions.ListWorkflowJobs(ctx, "octo-org", "alpha", job.GetRunID(), nil)
	if err != nil || jobs.GetTotalCount() != 1 {
		t.Errorf("jobs %+v, %v", jobs, err)
	}
	link, _, err := c.Actions.GetWorkflowJobLogs(ctx, "octo-org", "alpha", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(link.String())
	if err != nil {
		t.Fatal(err)
	}
	log, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(log) != "line\n##[error]boom\n" {
		t.Errorf("log %d %q", resp.StatusCode, log)
	}
	if resp, err := http.Get(strings.Replace(link.String(), "sig=", "sig=0", 1)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a forged log link answered %v %v", resp.Status, err)
	}
	st, _, err := c.Repositories.GetCombinedStatus(ctx, "octo-org", "alpha", sha, nil)
	if err != nil || st.GetState() != "failure" || len(st.Statuses) != 1 || st.Statuses[0].GetState() != "error" {
		t.Errorf("combined status %+v, %v", st, err)
	}
	pr := gh.AddPullRequest(repoA, githubtest.AppLogin, "x", "agent/t-1-x", "main")
	payload := string(gh.CheckSuitePayload(repoA, id))
	for _, want := range []string{`"head_sha":"` + sha, `"slug":"github-actions"`, `"conclusion":"failure"`, `"number":` + strconv.Itoa(pr)} {
		if !strings.Contains(payload, want) {
			t.Errorf("check_suite payload lacks %s:\n%s", want, payload)
		}
	}
}
