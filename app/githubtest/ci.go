package githubtest

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The repository's own CI as GitHub's API shows it: check runs of other
// apps on a commit (a GitHub Actions job is a check run of the
// github-actions app whose id is the job's), their annotations, the check
// suites they belong to (an Actions workflow run is one suite), Actions'
// workflow runs and jobs with their logs (the logs endpoint answers 302 to
// a signed download URL, as GitHub does), and commit statuses. Tests play
// CI with AddCheckRun, CompleteCheckRun and SetStatus, and deliver the
// check_suite and status webhooks from CheckSuitePayload and
// StatusPayload.

// ActionsApp is the slug of GitHub Actions' check runs.
const ActionsApp = "github-actions"

// Annotation is one annotation of a check run.
type Annotation struct {
	Path, Level, Title, Message string
	Line                        int
	// Column is where on Line, when the reporter said (0: not said).
	Column int
}

// Step is one step of an Actions job.
type Step struct{ Name, Conclusion string }

// CheckRunSpec is a check run another app reports on a commit.
type CheckRunSpec struct {
	Name, HeadSHA, HeadBranch string
	// App is the reporting app's slug; ActionsApp makes the run an
	// Actions job of the workflow Workflow, with Steps and Log.
	App                  string
	Status, Conclusion   string
	Title, Summary, Text string
	Annotations          []Annotation
	Workflow             string
	Steps                []Step
	Log                  string
	// HeadRepo is the fork (owner/name) whose pull request ran the
	// workflow; "" is the repository itself. GitHub runs a fork's pull
	// request's workflows in the base repository, on the fork's commit:
	// the workflow run's head_repository is the fork, and the suite names
	// no pull request.
	HeadRepo string
}

// repoCI is one repository's CI: suites and statuses by commit.
type repoCI struct {
	suites   map[int64]*suite
	statuses map[string][]*status // sha -> newest last
}

// suite is a check suite: one app's runs on a commit (an Actions workflow
// run's jobs).
type suite struct {
	id, runID          int64
	app, sha, branch   string
	workflow, headRepo string
	checkRuns          []int64
	status, conclusion string
}

type status struct {
	Context, State, Description, TargetURL string
	at                                     time.Time
}

func (s *Server) ciRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("GET /repos/{owner}/{repo}/check-runs/{id}/annotations", s.listAnnotations)
	// A branch's head as GitHub reads heads/<branch> in a commit path.
	h("GET /repos/{owner}/{repo}/commits/heads/{branch}/check-runs", s.onBranchHead(s.listCheckRuns))
	h("GET /repos/{owner}/{repo}/commits/heads/{branch}/status", s.onBranchHead(s.combinedStatus))
	h("GET /repos/{owner}/{repo}/commits/{ref}/status", s.combinedStatus)
	h("GET /repos/{owner}/{repo}/actions/jobs/{id}", s.getJob)
	h("GET /repos/{owner}/{repo}/actions/jobs/{id}/logs", s.jobLogLink)
	h("GET /repos/{owner}/{repo}/actions/runs/{id}", s.getWorkflowRun)
	h("GET /repos/{owner}/{repo}/actions/runs/{id}/jobs", s.listRunJobs)
}

// onBranchHead answers for the head commit of the path's branch.
func (s *Server) onBranchHead(fn func(http.ResponseWriter, *http.Request, *Repo)) func(http.ResponseWriter, *http.Request, *Repo) {
	return func(w http.ResponseWriter, r *http.Request, repo *Repo) {
		sha := branchSHA(repo.GitDir, r.PathValue("branch"))
		if sha == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "No commit found for SHA: heads/" + r.PathValue("branch")})
			return
		}
		r.SetPathValue("ref", sha)
		fn(w, r, repo)
	}
}

// ciOf is repo's CI; callers hold mu.
func (s *Server) ciOf(repo *Repo) *repoCI {
	if s.ci == nil {
		s.ci = map[string]*repoCI{}
	}
	c := s.ci[repo.FullName()]
	if c == nil {
		c = &repoCI{suites: map[int64]*suite{}, statuses: map[string][]*status{}}
		s.ci[repo.FullName()] = c
	}
	return c
}

// AddCheckRun reports a check run of another app on a commit and returns
// its id (an Actions job's id too).
func (s *Server) AddCheckRun(fullName string, spec CheckRunSpec) int64 {
	repo := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ciOf(repo)
	var st *suite
	for _, x := range c.suites {
		if x.sha == spec.HeadSHA && x.app == spec.App && x.workflow == spec.Workflow && x.headRepo == spec.HeadRepo {
			st = x
		}
	}
	if st == nil {
		s.nextID++
		st = &suite{id: s.nextID, app: spec.App, sha: spec.HeadSHA, branch: spec.HeadBranch, workflow: spec.Workflow, headRepo: spec.HeadRepo, status: "queued"}
		if spec.App == ActionsApp {
			s.nextID++
			st.runID = s.nextID
		}
		c.suites[st.id] = st
	}
	s.nextID++
	run := &CheckRun{ID: s.nextID, Name: spec.Name, HeadSHA: spec.HeadSHA, Status: spec.Status, Conclusion: spec.Conclusion,
		Title: spec.Title, Summary: spec.Summary, Text: spec.Text, App: spec.App, SuiteID: st.id,
		Annotations: spec.Annotations, Steps: spec.Steps, Log: spec.Log}
	if run.Conclusion != "" {
		run.Status = "completed"
	}
	repo.CheckRuns[run.ID] = run
	st.checkRuns = append(st.checkRuns, run.ID)
	s.settleSuite(repo, st)
	s.notify()
	return run.ID
}

// CompleteCheckRun ends a check run with conclusion.
func (s *Server) CompleteCheckRun(fullName string, id int64, conclusion string) {
	repo := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	run := repo.CheckRuns[id]
	run.Status, run.Conclusion = "completed", conclusion
	s.settleSuite(repo, s.ciOf(repo).suites[run.SuiteID])
	s.notify()
}

// settleSuite is a suite's status and conclusion from its runs: completed
// when all are, failure when any failed; callers hold mu.
func (s *Server) settleSuite(repo *Repo, st *suite) {
	st.status, st.conclusion = "completed", "success"
	for _, id := range st.checkRuns {
		run := repo.CheckRuns[id]
		if run.Status != "completed" {
			st.status, st.conclusion = "in_progress", ""
			return
		}
		if run.Conclusion != "success" && run.Conclusion != "neutral" && run.Conclusion != "skipped" {
			st.conclusion = "failure"
		}
	}
}

// SetStatus sets a commit status (context's newest state) on sha.
func (s *Server) SetStatus(fullName, sha, context, state, description string) {
	repo := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ciOf(repo)
	c.statuses[sha] = append(c.statuses[sha], &status{Context: context, State: state, Description: description,
		TargetURL: "https://ci.example/" + context, at: time.Now()})
	s.notify()
}

func (c *CheckRun) output() map[string]any {
	return map[string]any{"title": c.Title, "summary": c.Summary, "text": c.Text, "annotations_count": len(c.Annotations)}
}

func (s *Server) listAnnotations(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.CheckRuns[id]
	if run == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := []map[string]any{}
	for _, a := range run.Annotations {
		out = append(out, map[string]any{"path": a.Path, "start_line": a.Line, "end_line": a.Line, "annotation_level": a.Level,
			"title": a.Title, "message": a.Message, "blob_href": s.srv.URL + "/blob/" + a.Path})
	}
	writeJSON(w, http.StatusOK, out)
}

// combinedStatus is GET .../commits/{ref}/status: the newest status of
// each context, and their combined state.
func (s *Server) combinedStatus(w http.ResponseWriter, r *http.Request, repo *Repo) {
	sha := r.PathValue("ref")
	newest := map[string]*status{}
	for _, st := range s.ciOf(repo).statuses[sha] {
		newest[st.Context] = st
	}
	state, list := "success", []map[string]any{}
	for _, ctx := range slices.Sorted(maps.Keys(newest)) {
		st := newest[ctx]
		switch {
		case st.State == "failure" || st.State == "error":
			state = "failure"
		case st.State == "pending" && state == "success":
			state = "pending"
		}
		list = append(list, map[string]any{"context": st.Context, "state": st.State, "description": st.Description,
			"target_url": st.TargetURL, "created_at": st.at.UTC().Format(time.RFC3339)})
	}
	if len(list) == 0 {
		state = "pending"
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(list), "statuses": list})
}

// job finds the Actions job (and its suite) of id; callers hold mu.
func (s *Server) job(repo *Repo, id int64) (*CheckRun, *suite) {
	run := repo.CheckRuns[id]
	if run == nil || run.App != ActionsApp {
		return nil, nil
	}
	return run, s.ciOf(repo).suites[run.SuiteID]
}

func (s *Server) jobJSON(run *CheckRun, st *suite) map[string]any {
	steps := []map[string]any{}
	for i, stp := range run.Steps {
		steps = append(steps, map[string]any{"name": stp.Name, "status": "completed", "conclusion": stp.Conclusion, "number": i + 1})
	}
	m := map[string]any{"id": run.ID, "run_id": st.runID, "name": run.Name, "workflow_name": st.workflow, "head_sha": run.HeadSHA,
		"head_branch": st.branch, "status": run.Status, "steps": steps,
		"check_run_url": fmt.Sprintf("%s/repos/check-runs/%d", s.srv.URL, run.ID), "html_url": fmt.Sprintf("%s/actions/jobs/%d", s.srv.URL, run.ID)}
	if run.Conclusion != "" {
		m["conclusion"] = run.Conclusion
	}
	return m
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run, st := s.job(repo, id)
	if run == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, s.jobJSON(run, st))
}

// jobLogLink answers GitHub's way: 302 to a download URL good for a
// minute, which needs no token.
func (s *Server) jobLogLink(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run, _ := s.job(repo, id)
	if run == nil || run.Status != "completed" {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	exp := time.Now().Add(time.Minute).Unix()
	key := repo.FullName() + "/" + strconv.FormatInt(id, 10)
	w.Header().Set("Location", fmt.Sprintf("%s/job-logs/%s/%d?sig=%s&exp=%d", s.srv.URL, repo.FullName(), id, s.sign(key, exp), exp))
	w.WriteHeader(http.StatusFound)
}

// serveJobLog answers the download URL jobLogLink gave.
func (s *Server) serveJobLog(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/job-logs/")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	id, _ := strconv.ParseInt(rest[i+1:], 10, 64)
	s.mu.Lock()
	repo := s.repos[rest[:i]]
	var log string
	ok := repo != nil && s.signedOK(r, rest, "sig")
	if ok {
		if run, _ := s.job(repo, id); run != nil {
			log = run.Log
		} else {
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(log))
}

func (s *Server) workflowRun(repo *Repo, runID int64) *suite {
	for _, st := range s.ciOf(repo).suites {
		if st.runID == runID && runID != 0 {
			return st
		}
	}
	return nil
}

// workflowRunOf is the workflow run the path names, or nil after a 404.
func (s *Server) workflowRunOf(w http.ResponseWriter, r *http.Request, repo *Repo) *suite {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	st := s.workflowRun(repo, id)
	if st == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
	return st
}

func (s *Server) getWorkflowRun(w http.ResponseWriter, r *http.Request, repo *Repo) {
	st := s.workflowRunOf(w, r, repo)
	if st == nil {
		return
	}
	m := map[string]any{"id": st.runID, "name": st.workflow, "head_sha": st.sha, "head_branch": st.branch, "status": st.status,
		"check_suite_id": st.id, "html_url": fmt.Sprintf("%s/actions/runs/%d", s.srv.URL, st.runID)}
	head := repo.FullName()
	if st.headRepo != "" {
		head = st.headRepo
	}
	owner, name, _ := strings.Cut(head, "/")
	m["head_repository"] = map[string]any{"full_name": head, "name": name, "owner": map[string]any{"login": owner}, "fork": st.headRepo != ""}
	if st.conclusion != "" {
		m["conclusion"] = st.conclusion
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) listRunJobs(w http.ResponseWriter, r *http.Request, repo *Repo) {
	st := s.workflowRunOf(w, r, repo)
	if st == nil {
		return
	}
	jobs := []map[string]any{}
	for _, cid := range st.checkRuns {
		jobs = append(jobs, s.jobJSON(repo.CheckRuns[cid], st))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(jobs), "jobs": jobs})
}

// CheckSuitePayload is the check_suite webhook of the suite check run id
// belongs to, as GitHub sends it when the suite completes (sender: the
// suite's app's bot).
func (s *Server) CheckSuitePayload(fullName string, id int64) []byte {
	repo := s.Repo(fullName)
	s.mu.Lock()
	run := repo.CheckRuns[id]
	st := s.ciOf(repo).suites[run.SuiteID]
	prs := []map[string]any{} // a fork's suite names no pull request
	if st.headRepo == "" {
		prs = s.prsOfBranch(repo, st.branch, st.sha)
	}
	suiteJSON := map[string]any{"id": st.id, "head_branch": st.branch, "head_sha": st.sha, "status": st.status, "conclusion": st.conclusion,
		"app": map[string]any{"id": len(st.app), "slug": st.app, "name": st.app}, "pull_requests": prs, "latest_check_runs_count": len(st.checkRuns)}
	app := st.app
	s.mu.Unlock()
	return s.Payload("check_suite.completed", fullName, app+"[bot]", func(m map[string]any) { m["check_suite"] = suiteJSON })
}

// StatusPayload is the status webhook of context's newest status on sha,
// which is the head of branch.
func (s *Server) StatusPayload(fullName, sha, branch, context string) []byte {
	repo := s.Repo(fullName)
	s.mu.Lock()
	var st *status
	for _, x := range s.ciOf(repo).statuses[sha] {
		if x.Context == context {
			st = x
		}
	}
	s.mu.Unlock()
	return s.Payload("status", fullName, "ci-service[bot]", func(m map[string]any) {
		m["sha"], m["context"], m["state"], m["description"], m["target_url"] = sha, st.Context, st.State, st.Description, st.TargetURL
		m["branches"] = []any{map[string]any{"name": branch, "commit": map[string]any{"sha": sha}}}
	})
}

// prsOfBranch are the open PRs from branch whose head is sha, as a check
// suite names them; callers hold mu.
func (s *Server) prsOfBranch(repo *Repo, branch, sha string) []map[string]any {
	prs := []map[string]any{}
	for _, n := range sortedIssueNumbers(repo) {
		iss := repo.Issues[n]
		if iss.PR != nil && iss.State == "open" && iss.PR.Head == branch && iss.PR.HeadRepo == "" {
			prs = append(prs, map[string]any{"number": n, "head": map[string]any{"ref": branch, "sha": sha}, "base": map[string]any{"ref": iss.PR.Base}})
		}
	}
	return prs
}
