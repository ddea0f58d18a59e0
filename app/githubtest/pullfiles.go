package githubtest

import (
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A pull request's diff as GitHub serves it (GET .../pulls/N/files, a
// patch per file from the merge base to the head), the reviews posted
// through the API (POST .../pulls/N/reviews), whose inline comments GitHub
// takes only on lines of that diff (a 422 otherwise), and the
// refs/pull/N/head ref GitHub keeps of every pull request in the base
// repository, a fork's too.

// pullFile is one file of a pull request's diff.
type pullFile struct {
	Name, Status, Patch  string
	Additions, Deletions int
}

// headOf is the commit a pull request's head is at: its branch's, or for
// a fork's, the commit refs/pull/N/head holds.
func headOf(repo *Repo, iss *Issue) string {
	if iss.PR.HeadRepo == "" {
		if sha := branchSHA(repo.GitDir, iss.PR.Head); sha != "" {
			return sha
		}
	}
	return iss.PR.HeadSHA
}

// pullFiles reads the diff of pull request iss from git: merge base of
// the base branch and the head, to the head.
func pullFiles(repo *Repo, iss *Issue) ([]pullFile, error) {
	out, err := exec.Command(mustGit(), "--git-dir", repo.GitDir, "diff", "--no-color", "--no-ext-diff", "-U3",
		"refs/heads/"+iss.PR.Base+"..."+headOf(repo, iss)).Output()
	if err != nil {
		return nil, err
	}
	var files []pullFile
	for _, block := range strings.Split(string(out), "\ndiff --git ")[0:] {
		block = strings.TrimPrefix(block, "diff --git ")
		if strings.TrimSpace(block) == "" {
			continue
		}
		f := pullFile{Status: "modified"}
		head, patch, _ := strings.Cut(block, "\n@@")
		if patch != "" {
			f.Patch = strings.TrimRight("@@"+patch, "\n")
		}
		for _, l := range strings.Split(head, "\n") {
			switch {
			case strings.HasPrefix(l, "new file mode"):
				f.Status = "added"
			case strings.HasPrefix(l, "deleted file mode"):
				f.Status = "removed"
			case strings.HasPrefix(l, "+++ b/"):
				f.Name = strings.TrimPrefix(l, "+++ b/")
			case strings.HasPrefix(l, "--- a/") && f.Name == "":
				f.Name = strings.TrimPrefix(l, "--- a/")
			}
		}
		for _, l := range strings.Split(f.Patch, "\n") {
			switch {
			case strings.HasPrefix(l, "+"):
				f.Additions++
			case strings.HasPrefix(l, "-"):
				f.Deletions++
			}
		}
		files = append(files, f)
	}
	return files, nil
}

func (s *Server) listPullFiles(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	files, err := pullFiles(repo, iss)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	out := []map[string]any{}
	for _, f := range files {
		out = append(out, map[string]any{"filename": f.Name, "status": f.Status, "patch": f.Patch,
			"additions": f.Additions, "deletions": f.Deletions, "changes": f.Additions + f.Deletions})
	}
	writeJSON(w, http.StatusOK, out)
}

// hunkRange is a hunk header's new side: "+start,count".
var hunkRange = regexp.MustCompile(`(?m)^@@ -[0-9,]+ \+([0-9]+)(?:,([0-9]+))? @@`)

// hunkOf is the patch's hunk (counted from 1) whose new side holds line
// of the new file, 0 for none: GitHub takes a RIGHT-side review comment
// only there, and a multi-line one within one hunk.
func hunkOf(patch string, line int) int {
	for i, m := range hunkRange.FindAllStringSubmatch(patch, -1) {
		start, _ := strconv.Atoi(m[1])
		count := 1
		if m[2] != "" {
			count, _ = strconv.Atoi(m[2])
		}
		if line >= start && line < start+count {
			return i + 1
		}
	}
	return 0
}

// createReview submits a review as the App, as GitHub does: an event of
// APPROVE, REQUEST_CHANGES or COMMENT, and inline comments each on a line
// of the diff's new side; a comment on a file or line outside the diff
// fails the whole review with 422.
func (s *Server) createReview(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var body struct {
		CommitID string `json:"commit_id"`
		Body     string `json:"body"`
		Event    string `json:"event"`
		Comments []struct {
			Path      string `json:"path"`
			Line      int    `json:"line"`
			Side      string `json:"side"`
			StartLine int    `json:"start_line"`
			Body      string `json:"body"`
		} `json:"comments"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	states := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
	state, ok := states[body.Event]
	if !ok {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity", "errors": []string{"event must be one of APPROVE, REQUEST_CHANGES, COMMENT (the fake does not keep pending reviews)"}})
		return
	}
	if len(body.Body) > 65536 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []string{"body is too long (maximum is 65536 characters)"}})
		return
	}
	if body.CommitID != "" && exec.Command(mustGit(), "--git-dir", repo.GitDir, "cat-file", "-e", body.CommitID+"^{commit}").Run() != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity", "errors": []string{"commit_id is not part of the pull request"}})
		return
	}
	files, err := pullFiles(repo, iss)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	for _, c := range body.Comments {
		patch, found := "", false
		for _, f := range files {
			if f.Name == c.Path {
				patch, found = f.Patch, true
			}
		}
		switch {
		case !found:
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity", "errors": []string{"Path could not be resolved"}})
			return
		case c.Side == "LEFT" || hunkOf(patch, c.Line) == 0:
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity", "errors": []string{"Line could not be resolved"}})
			return
		case c.StartLine != 0 && (c.StartLine >= c.Line || hunkOf(patch, c.StartLine) != hunkOf(patch, c.Line)):
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity", "errors": []string{"start_line must be before line, in the same hunk"}})
			return
		}
	}
	s.nextID++
	rv := &Review{ID: s.nextID, User: AppLogin, State: state, Body: body.Body, SubmittedAt: time.Now(), CommitID: body.CommitID}
	iss.PR.Reviews = append(iss.PR.Reviews, rv)
	for _, c := range body.Comments {
		s.nextID++
		iss.PR.ReviewComments = append(iss.PR.ReviewComments, &ReviewComment{Comment: Comment{ID: s.nextID, User: AppLogin, Body: c.Body, CreatedAt: time.Now()},
			ReviewID: rv.ID, Path: c.Path, Line: c.Line, CommitID: body.CommitID})
	}
	writeJSON(w, http.StatusOK, s.reviewJSON(rv))
}

// syncPullRefs points refs/pull/N/head of every open pull request from a
// branch of repo at that branch's head, as GitHub keeps them.
func (s *Server) syncPullRefs(repo *Repo) {
	s.mu.Lock()
	heads := map[int]string{}
	for n, iss := range repo.Issues {
		if iss.PR != nil && iss.PR.HeadRepo == "" && iss.State == "open" {
			heads[n] = iss.PR.Head
		}
	}
	s.mu.Unlock()
	for n, branch := range heads {
		if sha := branchSHA(repo.GitDir, branch); sha != "" {
			_ = exec.Command(mustGit(), "--git-dir", repo.GitDir, "update-ref", "refs/pull/"+strconv.Itoa(n)+"/head", sha).Run()
		}
	}
}

// AddForkPullRequestWith opens a pull request as user from branch head of
// the fork headRepo into base, whose head commit adds files to base's: the
// commit is in fullName's git as refs/pull/N/head only, as GitHub keeps a
// fork's pull request.
func (s *Server) AddForkPullRequestWith(fullName, user, title, headRepo, head, base string, files map[string]string) int {
	s.t.Helper()
	r := s.Repo(fullName)
	tmp := "fork-pr-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	sha := s.seed(r.GitDir, tmp, s.BranchSHA(fullName, base), files, title)
	n := s.AddForkPullRequest(fullName, user, title, headRepo, head, base)
	s.git("", "--git-dir", r.GitDir, "update-ref", "refs/pull/"+strconv.Itoa(n)+"/head", sha)
	s.git("", "--git-dir", r.GitDir, "branch", "-D", tmp)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[n].PR.HeadSHA = sha
	return n
}

// PullRequestPayload is the pull_request webhook GitHub sends when the
// pull request's author does action ("opened", "ready_for_review"): the
// pull request as the API shows it, sent by its author.
func (s *Server) PullRequestPayload(fullName string, number int, action string) []byte {
	s.t.Helper()
	r := s.Repo(fullName)
	s.mu.Lock()
	iss := r.Issues[number]
	if iss == nil || iss.PR == nil {
		s.mu.Unlock()
		s.t.Fatalf("githubtest: #%d in %s is not a pull request", number, fullName)
	}
	pr, author := s.pullJSON(r, iss), iss.User
	s.mu.Unlock()
	return s.PayloadFrom([]byte(`{}`), fullName, author, func(m map[string]any) {
		m["action"], m["number"], m["pull_request"] = action, number, pr
	})
}

// SetDraft marks a pull request a draft, or ready for review.
func (s *Server) SetDraft(fullName string, number int, draft bool) {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[number].PR.Draft = draft
}

// AddReviewReply records user's reply in the review thread whose first
// comment is root and returns the reply's id and the
// pull_request_review_comment webhook GitHub sends for it.
func (s *Server) AddReviewReply(fullName string, number int, root int64, user, body string) (int64, []byte) {
	s.t.Helper()
	r := s.Repo(fullName)
	s.mu.Lock()
	iss := r.Issues[number]
	var parent *ReviewComment
	for _, c := range iss.PR.ReviewComments {
		if c.ID == root {
			parent = c
		}
	}
	if parent == nil {
		s.mu.Unlock()
		s.t.Fatalf("githubtest: no review comment %d on #%d", root, number)
	}
	s.nextID++
	c := &ReviewComment{Comment: Comment{ID: s.nextID, User: user, Body: body, CreatedAt: time.Now()},
		ReviewID: parent.ReviewID, Path: parent.Path, Line: parent.Line, InReplyTo: root, CommitID: parent.CommitID}
	iss.PR.ReviewComments = append(iss.PR.ReviewComments, c)
	pr, comment := s.pullJSON(r, iss), s.reviewCommentJSON(c)
	s.notify()
	s.mu.Unlock()
	return c.ID, s.PayloadFrom([]byte(`{}`), fullName, user, func(m map[string]any) {
		m["action"], m["pull_request"], m["comment"] = "created", pr, comment
	})
}
