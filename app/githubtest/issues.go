package githubtest

import (
	"net/http"
	"slices"
	"sort"
)

// Issues opened through the API (routines) and their state, the way
// GitHub keeps them: the caller (the App) is the author, labels missing
// from the repository are created on the way, and a closed issue stays
// closed until someone reopens it.

func (s *Server) issueRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("POST /repos/{owner}/{repo}/issues", s.createIssue)
	h("PATCH /repos/{owner}/{repo}/issues/{number}", s.editIssue)
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request, repo *Repo) {
	var body struct {
		Title  string   `json:"title"`
		Body   string   `json:"body"`
		Labels []string `json:"labels"`
	}
	if err := decodeBody(r, &body); err != nil || body.Title == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "title is required"})
		return
	}
	if len(body.Body) > 65536 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "body is too long (maximum is 65536 characters)"})
		return
	}
	n := repo.nextNumber
	repo.nextNumber++
	iss := &Issue{Number: n, Title: body.Title, Body: body.Body, User: AppLogin, State: "open"}
	for _, l := range body.Labels {
		repo.Labels[l] = true
		if !slices.Contains(iss.Labels, l) {
			iss.Labels = append(iss.Labels, l)
		}
	}
	repo.Issues[n] = iss
	writeJSON(w, http.StatusCreated, s.issueJSON(repo, iss))
}

func (s *Server) editIssue(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	var body struct {
		State *string `json:"state"`
	}
	if iss == nil || decodeBody(r, &body) != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if body.State != nil {
		iss.State = *body.State
	}
	writeJSON(w, http.StatusOK, s.issueJSON(repo, iss))
}

// CloseIssue closes an issue, as a person does.
func (s *Server) CloseIssue(fullName string, number int) {
	r := s.Repo(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Issues[number].State = "closed"
	s.notify()
}

// IssuesLabeled lists the issues (not pull requests) carrying label,
// oldest first.
func (s *Server) IssuesLabeled(fullName, label string) []Issue {
	r := s.Repo(fullName)
	s.mu.Lock()
	var ns []int
	for n, iss := range r.Issues {
		if iss.PR == nil && slices.Contains(iss.Labels, label) {
			ns = append(ns, n)
		}
	}
	s.mu.Unlock()
	sort.Ints(ns)
	out := make([]Issue, 0, len(ns))
	for _, n := range ns {
		out = append(out, s.Issue(fullName, n))
	}
	return out
}
