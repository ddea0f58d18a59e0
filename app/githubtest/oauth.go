package githubtest

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// people is the fake's web sign-in: the App's OAuth client, the person
// signed in to the fake's web pages, and the codes and user-to-server
// tokens the OAuth flow hands out.
type people struct {
	clientID, clientSecret string
	webUser                string
	codes                  map[string]string // code -> login
	tokens                 map[string]string // user token -> login
}

func (s *Server) peopleLocked() *people {
	if s.people == nil {
		s.people = &people{codes: map[string]string{}, tokens: map[string]string{}}
	}
	return s.people
}

// SetOAuthApp registers the App's OAuth client id and secret.
func (s *Server) SetOAuthApp(clientID, clientSecret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peopleLocked()
	p.clientID, p.clientSecret = clientID, clientSecret
}

// SignInAs makes login the person signed in to the fake's web pages:
// the next OAuth authorization is theirs ("" signs out).
func (s *Server) SignInAs(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peopleLocked().webUser = login
}

// UserTokens returns how many user-to-server tokens were issued.
func (s *Server) UserTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peopleLocked().tokens)
}

func (s *Server) userRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	// Sign-in is on GitHub's web host: URL() or WebURL(), whichever a
	// test gives the bot as GITHUB_WEB_URL.
	for _, web := range []string{"", "/web"} {
		h("GET "+web+"/login/oauth/authorize", s.authorize)
		h("POST "+web+"/login/oauth/access_token", s.accessToken)
	}
	h("GET /user", s.getUser)
	h("GET /user/installations", s.userInstallations)
	h("GET /user/installations/{id}/repositories", s.userInstallationRepos)
}

// authorize is GitHub's consent step, already granted: it sends the
// browser back to redirect_uri with a code for the signed-in person and
// the state it was given.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, _ *Repo) {
	p := s.peopleLocked()
	q := r.URL.Query()
	if p.clientID == "" || q.Get("client_id") != p.clientID {
		http.Error(w, "githubtest: unknown OAuth client_id "+q.Get("client_id"), http.StatusNotFound)
		return
	}
	if p.webUser == "" {
		http.Error(w, "githubtest: nobody is signed in to the fake (SignInAs)", http.StatusUnauthorized)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || back.Scheme == "" {
		http.Error(w, "githubtest: redirect_uri is required by the fake", http.StatusBadRequest)
		return
	}
	code := randomHex(10)
	p.codes[code] = p.webUser
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// accessToken exchanges a code (once) for a user-to-server token.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request, _ *Repo) {
	p := s.peopleLocked()
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request"})
		return
	}
	if r.PostForm.Get("client_id") != p.clientID || r.PostForm.Get("client_secret") != p.clientSecret || p.clientID == "" {
		writeJSON(w, http.StatusOK, map[string]string{"error": "incorrect_client_credentials"})
		return
	}
	login, ok := p.codes[r.PostForm.Get("code")]
	if !ok {
		writeJSON(w, http.StatusOK, map[string]string{"error": "bad_verification_code"})
		return
	}
	delete(p.codes, r.PostForm.Get("code"))
	tok := "ghu_" + randomHex(16)
	p.tokens[tok] = login
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "bearer", "scope": "", "expires_in": 28800})
}

// userOf is the person a user-to-server token belongs to.
func (s *Server) userOf(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	tok := strings.TrimPrefix(strings.TrimPrefix(auth, "Bearer "), "token ")
	login, ok := s.peopleLocked().tokens[tok]
	return login, ok
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, _ *Repo) {
	login, ok := s.userOf(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"login": login, "id": len(login), "type": "User"})
}

// readable lists the repositories of installation id (0: any) login can
// read, by name.
func (s *Server) readable(login string, id int64) []*Repo {
	var out []*Repo
	for _, name := range sortedRepoNames(s.repos) {
		r := s.repos[name]
		if perm := r.Permissions[login]; perm != "" && perm != "none" && (id == 0 || r.InstallationID == id) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) userInstallations(w http.ResponseWriter, r *http.Request, _ *Repo) {
	login, ok := s.userOf(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	seen := map[int64]bool{}
	list := []map[string]any{}
	for _, repo := range s.readable(login, 0) {
		if !seen[repo.InstallationID] {
			seen[repo.InstallationID] = true
			list = append(list, map[string]any{"id": repo.InstallationID, "account": map[string]any{"login": repo.Owner}})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "installations": list})
}

func (s *Server) userInstallationRepos(w http.ResponseWriter, r *http.Request, _ *Repo) {
	login, ok := s.userOf(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	list := []map[string]any{}
	for _, repo := range s.readable(login, id) {
		list = append(list, s.repoJSON(repo))
	}
	if len(list) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "repositories": list})
}
