// Package gitservetest is the tests' git server: a bare repository over
// git's smart HTTP protocol, through gitserve.Backend, behind basic auth
// the way GitHub takes an installation token, counting what it let in. The
// runner's remotes, the repository a sandbox clones from (dockertest) and
// the fake GitHub's git (githubtest, with GitHub's token rules) are all
// this server.
package gitservetest

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve"
)

// Hermetic is the environment that keeps git http-backend off the
// developer's configuration.
func Hermetic() []string { return []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"} }

// Options says where the server listens and whom it lets in.
type Options struct {
	// Listen is the address to listen on (default 127.0.0.1:0); Host is
	// the host in URL (default: the address listened on), such as
	// host.docker.internal for a container.
	Listen, Host string
	// Token is the password a request must present, unless Allow decides.
	Token string
	// Allow decides on each request's basic-auth credentials.
	Allow func(user, password string) bool
}

// Server serves one bare repository until the test ends.
type Server struct {
	// URL is the repository's clone URL.
	URL string

	mu       sync.Mutex
	o        Options
	authed   int
	rejected int
	pushes   int
}

// Serve serves bare (a bare repository's directory) until the test ends.
func Serve(t testing.TB, bare string, o Options) *Server {
	t.Helper()
	backend, err := gitserve.Backend("", filepath.Dir(bare), "", Hermetic()...)
	if err != nil {
		t.Fatal(err)
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		t.Fatalf("listen on %s: %v", o.Listen, err)
	}
	s := &Server{o: o}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowed(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	host, port, _ := net.SplitHostPort(l.Addr().String())
	if o.Host != "" {
		host = o.Host
	}
	s.URL = "http://" + net.JoinHostPort(host, port) + "/" + filepath.Base(bare)
	return s
}

func (s *Server) allowed(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok && s.o.Allow != nil {
		ok = s.o.Allow(user, pass)
	} else {
		ok = ok && pass == s.o.Token
	}
	if !ok {
		s.rejected++
		return false
	}
	s.authed++
	if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
		s.pushes++
	}
	return true
}

// Counts returns how many requests were let in and refused, and how many
// pushes (receive-pack requests) were let in.
func (s *Server) Counts() (authed, rejected, pushes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authed, s.rejected, s.pushes
}

// Pushes counts the pushes let in.
func (s *Server) Pushes() int {
	_, _, p := s.Counts()
	return p
}

// SetToken changes the token the server takes (a refreshed token).
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.Token = token
}
