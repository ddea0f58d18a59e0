// Package gitserve serves one local git repository over git's smart HTTP
// protocol (git http-backend behind net/http/cgi), with basic auth on a
// single token, so a sandbox that can only clone by URL can work on a
// repository that lives on the host: clones read it and pushes land in it,
// but only on refs/heads/agent/* branches (refs.go): no other branch, no
// tag, no deletion.
package gitserve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options configures a Server.
type Options struct {
	// Repo is the repository: a working tree (any directory inside one) or
	// a bare repository.
	Repo string
	// Listen is the address to listen on, e.g. "172.17.0.1:0" (the docker
	// bridge's gateway, where containers reach the host).
	Listen string
	// Host is the host name clients use in URL (default: the listen
	// address), e.g. host.docker.internal inside a container.
	Host string
	// Token is the password clients must present; empty makes a fresh
	// random one (Server.Token).
	Token string
	// Git is the git binary (default "git" on PATH).
	Git string
}

// Server serves one repository until Close.
type Server struct {
	// URL is the clone URL: http://HOST:PORT/<name>.git.
	URL string
	// Token is the password the server accepts (any user name).
	Token string
	// GitDir is the repository's git directory that pushes land in.
	GitDir string

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	rejected int
	pushes   int
	refused  int
}

// Start serves o.Repo. The caller must Close the server.
func Start(o Options) (*Server, error) {
	if o.Repo == "" {
		return nil, errors.New("gitserve: no repository given")
	}
	if o.Git == "" {
		o.Git = "git"
	}
	gitDir, err := gitOutput(o.Git, o.Repo, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return nil, fmt.Errorf("gitserve: %s is not a git repository: %w", o.Repo, err)
	}
	token := o.Token
	if token == "" {
		if token, err = NewToken(); err != nil {
			return nil, err
		}
	}
	name := repoName(gitDir)
	// The URL names the repository; the handler serves only this one, with
	// GIT_PROJECT_ROOT the git directory itself so nothing beside it is
	// reachable through a crafted path.
	prefix := "/" + name + ".git"
	backend, err := Backend(o.Git, gitDir, prefix)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("gitserve: listen on %s: %w", o.Listen, err)
	}
	s := &Server{Token: token, GitDir: gitDir, ln: ln}
	s.srv = &http.Server{
		Handler:           s.handler(prefix, backend),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = s.srv.Serve(ln) }()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if o.Host != "" {
		host = o.Host
	}
	s.URL = "http://" + net.JoinHostPort(host, port) + prefix
	return s, nil
}

func (s *Server) handler(prefix string, backend http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowed(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="sandbox-agent"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != prefix && !strings.HasPrefix(r.URL.Path, prefix+"/") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			if !s.screenPush(w, r) {
				return
			}
			s.mu.Lock()
			s.pushes++
			s.mu.Unlock()
		}
		backend.ServeHTTP(w, r)
	})
}

func (s *Server) allowed(r *http.Request) bool {
	ok := false
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Basic ") {
		if raw, err := base64.StdEncoding.DecodeString(a[len("Basic "):]); err == nil {
			_, pass, _ := strings.Cut(string(raw), ":")
			ok = subtle.ConstantTimeCompare([]byte(pass), []byte(s.Token)) == 1
		}
	}
	if !ok {
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
	}
	return ok
}

// Counts returns how many requests were refused for a wrong or missing
// token, and how many authenticated pushes arrived.
func (s *Server) Counts() (rejected, pushes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected, s.pushes
}

// Refused counts pushes refused for the refs they would change.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, letting requests in flight (a push) finish for
// a few seconds.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Backend is git's smart HTTP protocol for the repositories under
// projectRoot (git http-backend behind net/http/cgi), at the request paths
// below prefix: gitserve's server and every test's git server (the fake
// GitHub's, a test remote, the one a sandbox clones from) are this one.
// It takes pushes; who may push is its caller's to decide. env is added to
// its environment (tests keep git off the developer's configuration with
// GIT_CONFIG_GLOBAL=/dev/null).
func Backend(git, projectRoot, prefix string, env ...string) (http.Handler, error) {
	if git == "" {
		git = "git"
	}
	execPath, err := execPathOf(git)
	if err != nil {
		return nil, fmt.Errorf("gitserve: locate git http-backend: %w", err)
	}
	bin := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("gitserve: git http-backend not installed with git (%s): %w", bin, err)
	}
	return &cgi.Handler{
		Path: bin,
		Root: prefix,
		Dir:  projectRoot,
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + projectRoot,
			"GIT_HTTP_EXPORT_ALL=1",
			// A REMOTE_USER turns receive-pack on.
			"REMOTE_USER=x-access-token",
		}, env...),
		// HOME keeps the user's git identity and safe.directory settings;
		// PATH finds git's helpers.
		InheritEnv: []string{"PATH", "HOME", "XDG_CONFIG_HOME"},
	}, nil
}

// NewToken returns 32 random bytes in hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("gitserve: random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// repoName is the name in the URL: the working tree's directory for
// .../calc/.git, the bare directory's name without .git otherwise.
func repoName(gitDir string) string {
	base := filepath.Base(gitDir)
	if base == ".git" {
		base = filepath.Base(filepath.Dir(gitDir))
	}
	base = strings.TrimSuffix(base, ".git")
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	if b.Len() == 0 {
		return "repo"
	}
	return b.String()
}

// defaultExecPath is `git --exec-path` of the git on PATH, asked once a
// process: it is fixed when git is built, and every test starts a server
// or two (each git process costs ~15 ms of CPU on these machines).
var defaultExecPath = sync.OnceValues(func() (string, error) { return gitOutput("git", "", "--exec-path") })

// execPathOf is where git keeps its helper programs (http-backend).
func execPathOf(git string) (string, error) {
	if git == "git" {
		if p, err := defaultExecPath(); err == nil {
			return p, nil
		} // a failure is not kept: asked again below
	}
	return gitOutput(git, "", "--exec-path")
}

func gitOutput(git, dir string, args ...string) (string, error) {
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	out, err := exec.Command(git, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
