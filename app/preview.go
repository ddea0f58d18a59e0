package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// previewProxy serves a run's dev server, while the run lives, to the
// people who may see the run: under /runs/<task-id>/preview/ on the bot's
// origin (path mode), or, when the operator gives a preview domain, at a
// host of its own (preview_origin.go). The bot reaches the dev server
// through the backend (dispatch.PreviewDialer); nothing in the sandbox
// listens on the host.
//
// Whatever the mode the preview is held apart from the bot: the dev server
// never sees the viewer's cookies or any header that says who they are,
// only an allowlist of its response headers reaches the browser (no
// Set-Cookie, NEL, Report-To, Alt-Svc, HSTS...), no 1xx response does, and
// in path mode its pages run in a CSP sandbox (an opaque origin) whose
// scripts can neither read nor write the bot's cookies nor read its pages.
// What one run and one viewer can cost the bot is bounded
// (preview_bounds.go).
type previewProxy struct {
	lp     *livePages
	dialer dispatch.PreviewDialer // nil: the backend offers no previews
	proxy  *httputil.ReverseProxy
	runs   *runCache
	limits *previewLimits
	origin *previewOrigin // nil: path mode only
}

// previewHost is the made-up host a proxied request is addressed to: the
// transport's dial reads the task id back from it, so one transport keeps
// warm connections per run.
const previewHost = ".preview.invalid"

// previewPolicy runs a preview's pages in an opaque origin (path mode).
const previewPolicy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// forwardHeaders are the request headers the dev server gets; everything
// else (cookies, authorization, forwarding headers, the browser's
// language and identity) stays with the bot.
var forwardHeaders = []string{
	"Accept", "Accept-Encoding", "Cache-Control", "Content-Type", "Content-Length", "If-Match", "If-None-Match",
	"If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range", "Pragma",
	"Connection", "Upgrade", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions",
}

// Bounds of the transport to the dev servers: a dev server that never
// answers, answers headers without end or goes quiet holds nothing of the
// bot's for long.
const (
	previewDialTimeout   = 10 * time.Second
	previewHeaderTimeout = 30 * time.Second // the listener's write timeout bounds the response anyway
	previewHeaderBytes   = 64 << 10
	previewIdleConn      = 30 * time.Second
	// previewQuiet closes a connection to a dev server (a WebSocket's
	// tunnel included) after this long without a byte either way.
	previewQuiet = 10 * time.Minute
	// previewRefusePause is how long a request over the bounds waits for
	// its 503.
	previewRefusePause = time.Second
)

func newPreviewProxy(lp *livePages) *previewProxy {
	p := &previewProxy{lp: lp, runs: newRunCache(lp.backend, runCacheTTL), limits: newPreviewLimits(defaultPreviewBounds)}
	p.dialer, _ = lp.backend.(dispatch.PreviewDialer)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			ctx, cancel := context.WithTimeout(ctx, previewDialTimeout)
			defer cancel()
			c, err := p.dialer.DialPreview(ctx, strings.TrimSuffix(host, previewHost))
			if err != nil {
				return nil, err
			}
			return newQuietConn(c, previewQuiet), nil
		},
		// A run's connections (each an exec session on Nomad) are bounded
		// like its requests.
		MaxConnsPerHost:        defaultPreviewBounds.perRun,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        previewIdleConn,
		ResponseHeaderTimeout:  previewHeaderTimeout,
		MaxResponseHeaderBytes: previewHeaderBytes,
		DisableCompression:     true, // the browser's Accept-Encoding goes through as it is
		ForceAttemptHTTP2:      false,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.failed,
		FlushInterval:  -1, // server-sent events and streamed pages arrive as they are written
	}
	return p
}

// serve proxies one request after the same checks as the live page, and
// only while the run lives; with sign-in (si), the browser goes on to the
// run's preview under a ticket (path mode) or to its own origin.
func (p *previewProxy) serve(si *signIn) func(http.ResponseWriter, *http.Request, viewer) {
	return func(w http.ResponseWriter, r *http.Request, v viewer) {
		task := r.PathValue("task")
		if p.limits.overRate(task, "session:"+v.Login) {
			refuse(w, r, http.StatusTooManyRequests, errPreviewRate)
			return
		}
		if _, ok := p.liveRunOr404(w, r, task, v); !ok {
			return
		}
		if p.origin != nil && si != nil {
			p.origin.handOff(w, r, task, v.Login)
			return
		}
		if p.sendToTicket(w, r, si, task, v.Login) {
			return
		}
		p.forward(w, r, task, "session:"+v.Login, "/runs/"+task+"/preview")
	}
}

// forwardLive forwards a request a ticket or a preview origin's cookie
// stands for (the person's access was checked when it was made): within
// the viewer's rate, checked first, so a flood with a leaked ticket is
// refused before anything is looked up; then while the run lives.
func (p *previewProxy) forwardLive(w http.ResponseWriter, r *http.Request, task, viewerKey, mount string) {
	if p.limits.overRate(task, viewerKey) {
		refuse(w, r, http.StatusTooManyRequests, errPreviewRate)
		return
	}
	if _, ok := p.liveRunOr404(w, r, task, viewer{}); ok {
		p.forward(w, r, task, viewerKey, mount)
	}
}

// refuse answers a request over the bounds after a pause: a client that
// loops on refusals then costs the bot a timer, not a core (its
// connection's goroutine waits instead of reading its next request).
func refuse(w http.ResponseWriter, r *http.Request, code int, err error) {
	t := time.NewTimer(previewRefusePause)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return
	case <-t.C:
	}
	w.Header().Set("Retry-After", "2")
	http.Error(w, err.Error(), code)
}

// liveRunOr404 answers the request itself unless the run lives, the
// backend offers previews and v may see it.
func (p *previewProxy) liveRunOr404(w http.ResponseWriter, r *http.Request, task string, v viewer) (liveRun, bool) {
	if p.dialer == nil {
		http.Error(w, "no preview: this backend offers none", http.StatusNotFound)
		return liveRun{}, false
	}
	run, err := p.runs.get(r.Context(), task)
	if err == nil && !run.Live() {
		err = errNoRun
	}
	if err == nil {
		err = p.lp.allowed(run, v)
	}
	switch {
	case errors.Is(err, errNoRun):
		http.Error(w, "no preview: no such run, not in a repository you can read, or it has ended", http.StatusNotFound)
		return run, false
	case err != nil:
		p.lp.log.Warn().Err(err).Str("task_id", task).Msg("preview: ask the backend")
		http.Error(w, backendUnclear, http.StatusBadGateway)
		return run, false
	}
	return run, true
}

// forward proxies the request to the run's dev server within the bounds;
// mount is where the preview is served (the path prefix the dev server
// does not see, "" on a preview origin).
func (p *previewProxy) forward(w http.ResponseWriter, r *http.Request, task, viewerKey, mount string) {
	if r.Header.Get("Service-Worker") != "" {
		// A service worker would sit between the viewer and every later
		// request to this preview (its hand-off included).
		http.Error(w, "no service workers in a preview", http.StatusForbidden)
		return
	}
	release, err := p.limits.enter(r.Context(), task, viewerKey)
	if err != nil {
		refuse(w, r, http.StatusServiceUnavailable, err)
		return
	}
	defer release()
	req := &previewReq{task: task, mount: mount, rc: http.NewResponseController(w), pathMode: mount != ""}
	if t, _, ok := ticketOf(r); ok && mount != "" {
		req.ticket = t
	}
	ctx := context.WithValue(r.Context(), previewReqKey{}, req)
	p.proxy.ServeHTTP(no1xx{w}, r.WithContext(ctx))
}

// previewReq is what the response side needs of the request it answers.
type previewReq struct {
	task, mount string
	ticket      string // path mode: the ticket in the path
	pathMode    bool
	rc          *http.ResponseController
}

type previewReqKey struct{}

func (p *previewProxy) rewrite(pr *httputil.ProxyRequest) {
	req, _ := pr.In.Context().Value(previewReqKey{}).(*previewReq)
	path := pr.In.URL.Path
	if req != nil && req.mount != "" {
		path = "/" + strings.TrimPrefix(path, req.mount+"/")
		if _, rest, ok := ticketOf(pr.In); ok {
			path = "/" + rest // the ticket is the bot's, never the dev server's
		}
	}
	task := ""
	if req != nil {
		task = req.task
	}
	pr.Out.URL.Scheme, pr.Out.URL.Host = "http", task+previewHost
	pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
	pr.Out.Host = "localhost"
	h := http.Header{}
	for _, k := range forwardHeaders {
		if vs := pr.Out.Header.Values(k); len(vs) > 0 {
			h[k] = vs
		}
	}
	h.Set("User-Agent", "sandbox-bot-preview")
	pr.Out.Header = h
}

func (p *previewProxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if errors.Is(err, dispatch.ErrNoPreview) || errors.Is(err, dispatch.ErrNotFound) {
		http.Error(w, "no preview: this run offers no dev server (none configured, or it has ended)", http.StatusNotFound)
		return
	}
	req, _ := r.Context().Value(previewReqKey{}).(*previewReq)
	task := ""
	if req != nil {
		task = req.task
	}
	p.lp.log.Debug().Err(err).Str("task_id", task).Msg("preview: the dev server did not answer")
	http.Error(w, "the run's dev server did not answer (it may not be up yet)", http.StatusBadGateway)
}

// no1xx keeps informational responses (103 Early Hints and the like) from
// the browser: httputil.ReverseProxy forwards them, headers and all, as
// they arrive, outside ModifyResponse. 101 is a final response there.
type no1xx struct{ http.ResponseWriter }

func (w no1xx) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach Flush and Hijack (a WebSocket).
func (w no1xx) Unwrap() http.ResponseWriter { return w.ResponseWriter }
