package githubtest

import (
	"net/http"
	"time"
)

// Review is a submitted pull request review.
type Review struct {
	ID          int64
	User        string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED
	Body        string
	SubmittedAt time.Time
	// CommitID is the commit a review posted through the API is of.
	CommitID string
}

func (s *Server) reviewRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("GET /repos/{owner}/{repo}/pulls/{number}/reviews", s.listReviews)
	h("POST /repos/{owner}/{repo}/pulls/{number}/comments", s.createReviewComment)
	h("POST /repos/{owner}/{repo}/pulls/{number}/reviews", s.createReview)
	h("GET /repos/{owner}/{repo}/pulls/{number}/files", s.listPullFiles)
}

// AddReview records a submitted review on a PR and returns its id (for
// building pull_request_review payloads).
func (s *Server) AddReview(fullName string, number int, user, state, body string) int64 {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := r.Issues[number].PR
	if pr == nil {
		s.t.Fatalf("githubtest: #%d in %s is not a pull request", number, fullName)
	}
	s.nextID++
	pr.Reviews = append(pr.Reviews, &Review{ID: s.nextID, User: user, State: state, Body: body, SubmittedAt: time.Now()})
	s.notify()
	return s.nextID
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := []map[string]any{}
	for _, rv := range iss.PR.Reviews {
		out = append(out, s.reviewJSON(rv))
	}
	writeJSON(w, http.StatusOK, out)
}

// createReviewComment answers the reply form of POST .../comments
// (in_reply_to, go-github's CreateCommentInReplyTo), as the App. Like
// GitHub, a reply to a reply joins the thread of its first comment, and a
// reply to a comment of another PR is refused.
func (s *Server) createReviewComment(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var body struct {
		Body      string `json:"body"`
		InReplyTo int64  `json:"in_reply_to"`
	}
	if iss == nil || iss.PR == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if err := decodeBody(r, &body); err != nil || body.Body == "" || body.InReplyTo == 0 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "body and in_reply_to are required (the fake implements replies only)"})
		return
	}
	var parent *ReviewComment
	for _, c := range iss.PR.ReviewComments {
		if c.ID == body.InReplyTo {
			parent = c
		}
	}
	if parent == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	root := parent.ID
	if parent.InReplyTo != 0 {
		root = parent.InReplyTo
	}
	s.nextID++
	c := &ReviewComment{Comment: Comment{ID: s.nextID, User: AppLogin, Body: body.Body, CreatedAt: time.Now()},
		ReviewID: parent.ReviewID, Path: parent.Path, Line: parent.Line, InReplyTo: root, CommitID: parent.CommitID}
	iss.PR.ReviewComments = append(iss.PR.ReviewComments, c)
	writeJSON(w, http.StatusCreated, map[string]any{"id": c.ID, "body": c.Body, "user": s.user(c.User), "path": c.Path,
		"line": c.Line, "in_reply_to_id": root, "created_at": c.CreatedAt.UTC().Format(time.RFC3339)})
}

// ReplyToReviewComment records the App's reply in the thread of review
// comment id on a PR (as if the bot had posted it before a restart) and
// returns the reply's id.
func (s *Server) ReplyToReviewComment(fullName string, number int, id int64, body string) int64 {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := r.Issues[number].PR
	s.nextID++
	pr.ReviewComments = append(pr.ReviewComments, &ReviewComment{Comment: Comment{ID: s.nextID, User: AppLogin, Body: body, CreatedAt: time.Now()}, InReplyTo: id})
	s.notify()
	return s.nextID
}

func (s *Server) reviewJSON(rv *Review) map[string]any {
	return map[string]any{"id": rv.ID, "user": s.user(rv.User), "state": rv.State, "body": rv.Body,
		"submitted_at": rv.SubmittedAt.UTC().Format(time.RFC3339), "commit_id": rv.CommitID}
}
