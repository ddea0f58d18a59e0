// Package gateway is the sandbox's model gateway: a plain-HTTP reverse
// proxy on loopback, run by the init (root), that routes /NAME/... to
// provider NAME's base URL and puts the provider's key on the request. The
// agent and its harness hold only the gateway's address and a dummy key;
// the keys live in this process's memory, read from a file the agent cannot
// open. Streaming responses (SSE) are passed through as they arrive.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// inboundAuth are the credential headers a client may send; all are dropped
// so nothing the agent sets reaches the provider beside the real key.
var inboundAuth = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization", "Cookie"}

// Gateway routes model requests to their providers.
type Gateway struct {
	routes map[string]*route
	log    zerolog.Logger
	// requests wakes whoever waits at NextRequestPath (the runner, to say
	// when the agent's first model request left).
	requests *requestSignal
}

type route struct {
	p      dispatch.GatewayProvider
	target *url.URL
	proxy  *httputil.ReverseProxy
}

// Options tune a Gateway; the zero value is what the sandbox uses.
type Options struct {
	// Transport reaches the providers; default: a clone of
	// http.DefaultTransport (which honours HTTPS_PROXY).
	Transport http.RoundTripper
	Logger    zerolog.Logger
}

// Load reads the gateway's file.
func Load(file string) (dispatch.GatewayConfig, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return dispatch.GatewayConfig{}, fmt.Errorf("model gateway: read providers file: %w", err)
	}
	c, err := dispatch.ParseGatewayConfig(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// New builds the gateway for cfg's providers.
func New(cfg dispatch.GatewayConfig, o Options) (*Gateway, error) {
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every request of an agent goes to one or two hosts: keep enough
		// idle connections that a burst of tool turns reuses them.
		t.MaxIdleConnsPerHost = 16
		tr = t
	}
	g := &Gateway{routes: map[string]*route{}, log: o.Logger, requests: newRequestSignal()}
	for _, p := range cfg.Providers {
		if _, dup := g.routes[p.Name]; dup {
			return nil, fmt.Errorf("model gateway: provider %q configured twice", p.Name)
		}
		target, err := url.Parse(p.BaseURL)
		if err != nil || target.Host == "" {
			return nil, fmt.Errorf("model gateway: provider %s: base URL %q is not an absolute URL", p.Name, p.BaseURL)
		}
		r := &route{p: p, target: target}
		r.proxy = &httputil.ReverseProxy{
			Rewrite:   r.rewrite,
			Transport: tr,
			// Flush every write: an SSE stream must reach the agent event
			// by event, or its watchdog sees a silent model.
			FlushInterval: -1,
			ErrorHandler:  g.upstreamError(r),
			// A stream cut short (the agent killed mid-answer) is logged
			// here, not on the process's stderr.
			ErrorLog: stdlog.New(o.Logger.With().Str("provider", p.Name).Logger(), "model gateway: ", 0),
		}
		g.routes[p.Name] = r
	}
	return g, nil
}

// Providers are the names served, sorted.
func (g *Gateway) Providers() []string {
	var names []string
	for n := range g.routes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (r *route) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(r.target)
	for _, h := range inboundAuth {
		pr.Out.Header.Del(h)
	}
	for _, h := range droppedHeaders {
		pr.Out.Header.Del(h)
	}
	if r.p.Key != "" {
		switch r.p.API {
		case dispatch.APIAnthropic:
			pr.Out.Header.Set("X-Api-Key", r.p.Key)
		default:
			pr.Out.Header.Set("Authorization", "Bearer "+r.p.Key)
		}
	}
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == NextRequestPath {
		g.requests.serveNext(w, req)
		return
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	r, ok := g.routes[name]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model gateway: no provider %q here; served: %s (address them as /NAME/...)", name, strings.Join(g.Providers(), ", ")))
		return
	}
	// A cleaned path cannot climb out of the provider's base path with
	// the provider's key on it. The handler owns req: ReverseProxy clones
	// it for the outbound request.
	req.URL.Path = path.Clean("/" + rest)
	if strings.HasSuffix(rest, "/") && req.URL.Path != "/" {
		req.URL.Path += "/"
	}
	req.URL.RawPath = ""
	if err := allowed(r.p.API, req.Method, req.URL.Path); err != nil {
		g.log.Warn().Str("provider", name).Str("method", req.Method).Str("path", req.URL.Path).Msg("model request refused: not a model endpoint")
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	start := time.Now()
	g.requests.fire(name)
	sw := &statusWriter{ResponseWriter: w}
	r.proxy.ServeHTTP(sw, req)
	g.log.Debug().Str("provider", name).Str("method", req.Method).Str("path", req.URL.Path).
		Int("status", sw.status).Dur("duration", time.Since(start)).Msg("model request")
}

// upstreamError answers 502 when the provider cannot be reached. The error
// names the provider and the URL, never a header, so no key is in it.
func (g *Gateway) upstreamError(r *route) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, req *http.Request, err error) {
		if errors.Is(err, context.Canceled) {
			// The agent went away (killed by the watchdog, budget guard).
			return
		}
		msg := fmt.Sprintf("model gateway: provider %s at %s: %v", r.p.Name, r.target.Host, err)
		g.log.Warn().Str("provider", r.p.Name).Str("upstream", r.target.Host).Err(err).Msg("provider unreachable")
		writeError(w, http.StatusBadGateway, msg)
	}
}

// writeError answers in the shape both OpenAI and Anthropic clients parse.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]any{"type": "api_error", "message": msg},
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes through to the connection, for SSE.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Server is a running gateway.
type Server struct {
	// URL is the gateway's base URL, http://127.0.0.1:PORT.
	URL string
	srv *http.Server
	ln  net.Listener
}

// Serve starts g on addr ("127.0.0.1:0" picks a free port) until ctx ends or
// Close is called.
func Serve(ctx context.Context, g *Gateway, addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("model gateway: listen on %s: %w", addr, err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln,
		srv: &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns on Close
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return s, nil
}

// Close stops the gateway; streams in flight are cut.
func (s *Server) Close() { _ = s.srv.Close() }

// Env is what the runner gets: the gateway's address and its providers.
func (s *Server) Env(cfg dispatch.GatewayConfig) map[string]string {
	return map[string]string{
		dispatch.EnvModelGateway:   s.URL,
		dispatch.EnvModelProviders: cfg.ProvidersEnv(),
	}
}
