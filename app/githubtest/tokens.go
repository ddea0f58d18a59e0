package githubtest

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Installation tokens behave here as on GitHub: a token narrowed to some
// repositories reaches only those; contents:read fetches but cannot push
// (403), contents:write does both; a revoked or expired token is refused
// everywhere (401), API and git alike. DELETE /installation/token revokes
// the token that authenticates it, and the fake records when.

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// Token returns a minted token by value.
func (s *Server) Token(value string) (Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[value]
	if !ok {
		return Token{}, false
	}
	return *t, true
}

// RevokedTokens returns the tokens revoked so far, in revocation order.
func (s *Server) RevokedTokens() []Token {
	var out []Token
	for _, t := range s.Tokens() {
		if t.Revoked() {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b Token) int { return a.RevokedAt.Compare(b.RevokedAt) })
	return out
}

// WaitRevoked waits until every token in values is revoked and returns
// them; it fails the test after timeout naming those still live.
func (s *Server) WaitRevoked(timeout time.Duration, values ...string) []Token {
	s.t.Helper()
	var live []string
	s.WaitFor(timeout, "revocation of every token", func() bool {
		live = live[:0]
		for _, v := range values {
			if t, ok := s.Token(v); !ok || !t.Revoked() {
				live = append(live, mask(v))
			}
		}
		return len(live) == 0
	})
	out := make([]Token, 0, len(values))
	for _, v := range values {
		t, _ := s.Token(v)
		out = append(out, t)
	}
	return out
}

// mask shortens a token for test messages.
func mask(v string) string {
	if len(v) > 12 {
		return v[:12] + "…"
	}
	return v
}

// bearer is the token an API request authenticates with ("token X" as
// go-github's installation transport sends it, "Bearer X" as oauth2 does).
func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if v, ok := strings.CutPrefix(a, "token "); ok {
		return v
	}
	v, _ := strings.CutPrefix(a, "Bearer ")
	return v
}

// deadToken reports whether the request carries a token this fake minted
// that is revoked or expired: GitHub answers such requests 401 whatever
// they ask for. Callers hold mu.
func (s *Server) deadToken(value string) bool {
	t := s.tokens[value]
	return t != nil && (t.Revoked() || time.Now().After(t.ExpiresAt))
}

// revokeToken is DELETE /installation/token: the token authenticating the
// request revokes itself.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, _ *Repo) {
	if s.revokeFailures > 0 {
		s.revokeFailures--
		writeJSON(w, http.StatusBadGateway, map[string]string{"message": "Server Error"})
		return
	}
	t := s.tokens[bearer(r)]
	if t == nil {
		// An App JWT or a stranger's token: nothing to revoke.
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	t.RevokedAt = time.Now()
	w.WriteHeader(http.StatusNoContent)
}

// gitAccess decides a git request the way GitHub does for installation
// tokens and writes the refusal when there is one. push is a receive-pack
// request (its advertisement or the push itself).
func (s *Server) gitAccess(w http.ResponseWriter, repo *Repo, tok *Token, push bool) bool {
	if tok == nil || tok.Revoked() || time.Now().After(tok.ExpiresAt) {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
		return false
	}
	if tok.InstallationID != repo.InstallationID || (len(tok.Repositories) > 0 && !slices.Contains(tok.Repositories, repo.Name)) {
		// GitHub does not tell a token what exists beyond its reach.
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return false
	}
	contents := "write" // an unnarrowed token has the installation's permissions
	if tok.Permissions != nil {
		contents = tok.Permissions["contents"]
	}
	if contents == "write" || (!push && contents == "read") {
		return true
	}
	// git prints a text/plain body of a refused request as "remote: ...".
	http.Error(w, fmt.Sprintf("Permission to %s.git denied to %s.", repo.FullName(), AppLogin), http.StatusForbidden)
	return false
}

// FailRevocations makes the next n DELETE /installation/token calls answer
// 502 without revoking, as GitHub does on a bad day.
func (s *Server) FailRevocations(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeFailures = n
}

// GitAs runs git in dir as a sandbox would, with token as the password of
// every URL of this fake among args, and returns its combined output.
func (s *Server) GitAs(dir, token string, args ...string) (string, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, s.srv.URL+"/") {
			u, err := url.Parse(a)
			if err != nil {
				return "", err
			}
			u.User = url.UserPassword("x-access-token", token)
			args[i] = u.String()
		}
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Agent", "GIT_AUTHOR_EMAIL=agent@localhost", "GIT_COMMITTER_NAME=Agent", "GIT_COMMITTER_EMAIL=agent@localhost")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
