// Package dockerfilter is the agent's Docker: a socket the init serves
// that forwards to the inner dockerd what a project needs (containers with
// published ports, volumes, networks, compose, builds, pulls, logs, exec,
// attach) and refuses every host-level setting with an error in the
// engine's own format, so the docker CLI prints it. The real socket stays
// root's.
//
// The policy is strict: request bodies are decoded as the engine decodes
// them, every field of a container's HostConfig is either known and
// weighed or refused when set, and an endpoint the filter does not list is
// refused.
package dockerfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// maxBody caps the JSON bodies the filter reads (a create body is a few KB).
const maxBody = 8 << 20

// Config is where the filter listens and what it guards.
type Config struct {
	// Socket is the path the agent's DOCKER_HOST points at.
	Socket string
	// Upstream is the real daemon's socket.
	Upstream string
	// Workspace is the directory whose contents containers may mount.
	Workspace string
	// StageDir holds the staged bind mounts (root only).
	StageDir string
	// IPv6 says the init fenced IPv6 too (its deny list and allowlist
	// rules cover forwarded IPv6): only then may the agent create IPv6
	// networks, whose containers would otherwise route around the fence.
	IPv6 bool
	Log  zerolog.Logger
}

// Filter is a running filter.
type Filter struct {
	cfg    Config
	policy *Policy
	ws     *Workspace
	proxy  *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener
	done   chan struct{}
}

// Start listens on cfg.Socket (mode 0666: every user of the sandbox gets
// the filtered Docker) and serves until Close.
func Start(cfg Config) (*Filter, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.Socket), 0o755); err != nil {
		return nil, fmt.Errorf("docker filter: create %s: %w", filepath.Dir(cfg.Socket), err)
	}
	_ = os.Remove(cfg.Socket)
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("docker filter: listen on %s: %w", cfg.Socket, err)
	}
	if err := os.Chmod(cfg.Socket, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("docker filter: chmod %s: %w", cfg.Socket, err)
	}
	f := newFilter(cfg)
	f.ln = ln
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error().Err(err).Msg("docker filter stopped serving")
		}
	}()
	// A workspace bind shows the container every hard link in it; only the
	// kernel's protected_hardlinks stops the agent from linking a file of
	// root's (/etc/shadow) into the workspace.
	if b, err := os.ReadFile("/proc/sys/fs/protected_hardlinks"); err == nil && strings.TrimSpace(string(b)) != "1" {
		cfg.Log.Warn().Msg("fs.protected_hardlinks is off on this host: the agent can hard-link root's files into the workspace and bind them into a container; turn it on (sysctl fs.protected_hardlinks=1)")
	}
	cfg.Log.Info().Str("socket", cfg.Socket).Str("workspace", cfg.Workspace).Msg("docker filter serving")
	return f, nil
}

func newFilter(cfg Config) *Filter {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", cfg.Upstream)
	}
	transport := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	ws := &Workspace{Root: filepath.Clean(cfg.Workspace), StageDir: cfg.StageDir}
	f := &Filter{cfg: cfg, ws: ws}
	mine := newOwned()
	f.policy = &Policy{Binds: ws, Inspect: engineInspector{client: &http.Client{Transport: transport, Timeout: 30 * time.Second}},
		Socket: cfg.Socket, Owned: mine, IPv6: cfg.IPv6}
	f.proxy = &httputil.ReverseProxy{
		ModifyResponse: mine.recordCreated,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "docker"
			pr.Out.Host = "docker"
		},
		Transport: transport,
		// Logs, events and pull progress stream; nothing may sit in a buffer.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "sandbox docker filter: the inner Docker daemon did not answer: "+err.Error())
		},
	}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 30 * time.Second}
	return f
}

// ServeHTTP decides and forwards one request.
func (f *Filter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if path.Clean(p) != p && path.Clean(p)+"/" != p {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("sandbox docker filter: path %q is not clean", p))
		return
	}
	if mt := formBody(r.Header); mt != "" {
		msg := fmt.Sprintf("sandbox docker filter: a body of type %s on %s %s is refused: the engine would read it as parameters the filter does not check; send parameters in the query", mt, r.Method, p)
		f.cfg.Log.Info().Str("method", r.Method).Str("path", p).Str("refused", msg).Msg("docker request refused")
		writeError(w, http.StatusForbidden, msg)
		return
	}
	var read []byte
	req := request{
		method:  r.Method,
		minor:   apiMinor(p),
		version: versionOf(p),
		path:    splitPath(p),
		query:   r.URL.Query(),
		hasBody: r.ContentLength != 0,
		body: func() ([]byte, error) {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				return nil, fmt.Errorf("read request body: %w", err)
			}
			if len(b) > maxBody {
				return nil, fmt.Errorf("request body is larger than %d bytes", maxBody)
			}
			read = b
			return b, nil
		},
	}
	v := f.policy.decide(r.Context(), req)
	if v.err != nil {
		status := http.StatusBadRequest
		switch {
		case IsRefusal(v.err):
			status = http.StatusForbidden
			f.cfg.Log.Info().Str("method", r.Method).Str("path", p).Str("refused", v.err.Error()).Msg("docker request refused")
		case errors.Is(v.err, errEngine):
			status = http.StatusBadGateway
		case errors.As(v.err, new(*noSuchContainer)):
			status = http.StatusNotFound
		}
		writeError(w, status, v.err.Error())
		return
	}
	if v.body == nil && read != nil {
		v.body = read
	}
	if v.path != "" {
		r.URL.Path, r.URL.RawPath = v.path, ""
	}
	if v.body != nil {
		r.Body = io.NopCloser(bytes.NewReader(v.body))
		r.ContentLength = int64(len(v.body))
		r.Header.Set("Content-Length", fmt.Sprint(len(v.body)))
		r.Header.Del("Transfer-Encoding")
		r.TransferEncoding = nil
	}
	f.proxy.ServeHTTP(w, r)
}

// writeError answers in the engine's error format.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// Close stops serving and unmounts what the filter staged.
func (f *Filter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := f.srv.Shutdown(ctx)
	if err != nil {
		// Hijacked streams (attach, exec) do not end on Shutdown.
		err = f.srv.Close()
	}
	if f.done != nil {
		<-f.done
	}
	_ = os.Remove(f.cfg.Socket)
	return errors.Join(err, f.ws.Close())
}

// errEngine marks a failure to ask the engine about a request.
var errEngine = errors.New("inner Docker daemon")

// engineInspector asks the real daemon.
type engineInspector struct{ client *http.Client }

func (e engineInspector) get(ctx context.Context, p string, v any) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+p, nil)
	if err != nil {
		return false, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: GET %s: %v", errEngine, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("%w: GET %s: %s: %s", errEngine, p, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return false, fmt.Errorf("%w: GET %s: %v", errEngine, p, err)
	}
	return true, nil
}

func (e engineInspector) Container(ctx context.Context, id string) (*Existing, error) {
	var c struct {
		ID         string
		HostConfig map[string]any
		Mounts     []MountPoint
	}
	found, err := e.get(ctx, "/containers/"+url.PathEscape(id)+"/json", &c)
	if err != nil || !found {
		return nil, err
	}
	return &Existing{ID: c.ID, HostConfig: c.HostConfig, Mounts: c.Mounts}, nil
}

func (e engineInspector) NetworkDriver(ctx context.Context, name string) (string, error) {
	var n struct{ Driver string }
	if _, err := e.get(ctx, "/networks/"+url.PathEscape(name), &n); err != nil {
		return "", err
	}
	return n.Driver, nil
}
