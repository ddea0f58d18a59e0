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

// previewProxy serves /runs/<task-id>/preview/: the run's dev server, while
// the run lives, to the people who may see the run. The bot reaches the
// dev server through the backend (dispatch.PreviewDialer); nothing in the
// sandbox listens on the host.
//
// The preview shares the bot's origin under its own path, so it is held
// apart from the bot's pages: the dev server never sees the viewer's
// cookies or any header that says who they are, it cannot set a cookie
// (Set-Cookie is dropped), and its pages run in a CSP sandbox (an opaque
// origin) whose scripts can neither read nor write the bot's cookies and
// cannot read the bot's pages.
type previewProxy struct {
	lp     *livePages
	dialer dispatch.PreviewDialer // nil: the backend offers no previews
	proxy  *httputil.ReverseProxy
}

// previewHost is the made-up host a proxied request is addressed to: the
// transport's dial reads the task id back from it, so one transport keeps
// warm connections per run.
const previewHost = ".preview.invalid"

// previewPolicy runs a preview's pages in an opaque origin.
const previewPolicy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// forwardHeaders are the request headers the dev server gets; everything
// else (cookies, authorization, forwarding headers, the browser's
// language and identity) stays with the bot.
var forwardHeaders = []string{
	"Accept", "Accept-Encoding", "Cache-Control", "Content-Type", "Content-Length", "If-Match", "If-None-Match",
	"If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range", "Pragma",
	"Connection", "Upgrade", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions",
}

func newPreviewProxy(lp *livePages) *previewProxy {
	p := &previewProxy{lp: lp}
	p.dialer, _ = lp.backend.(dispatch.PreviewDialer)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			return p.dialer.DialPreview(ctx, strings.TrimSuffix(host, previewHost))
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true, // the browser's Accept-Encoding goes through as it is
		ForceAttemptHTTP2:   false,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		ModifyResponse: modifyPreviewResponse,
		ErrorHandler:   p.failed,
		FlushInterval:  -1, // server-sent events and streamed pages arrive as they are written
	}
	return p
}

// serve proxies one request after the same checks as the live page, and
// only while the run lives; with sign-in (si), the browser gets the run's
// preview ticket.
func (p *previewProxy) serve(si *signIn) func(http.ResponseWriter, *http.Request, viewer) {
	return func(w http.ResponseWriter, r *http.Request, v viewer) {
		if run, ok := p.lp.findOr404(w, r, v, false); ok && p.live(w, r, run) && !p.sendToTicket(w, r, si, run.Meta.TaskID) {
			p.forward(w, r)
		}
	}
}

// serveChecked proxies a request whose ticket says the person's access was
// checked; the run must still live.
func (p *previewProxy) serveChecked(w http.ResponseWriter, r *http.Request) {
	if run, ok := p.lp.findOr404(w, r, viewer{}, false); ok && p.live(w, r, run) {
		p.forward(w, r)
	}
}

// live answers 404 for a run that has ended or a backend without previews.
func (p *previewProxy) live(w http.ResponseWriter, r *http.Request, run liveRun) bool {
	if !run.Live() || p.dialer == nil {
		http.Error(w, "no preview: the run has ended, or this backend offers none", http.StatusNotFound)
		return false
	}
	return true
}

func (p *previewProxy) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "" {
		// A WebSocket lives as long as the page; the listener's timeouts
		// are for ordinary requests.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}
	p.proxy.ServeHTTP(w, r)
}

func (p *previewProxy) rewrite(pr *httputil.ProxyRequest) {
	task := pr.In.PathValue("task")
	path := "/" + strings.TrimPrefix(pr.In.URL.Path, "/runs/"+task+"/preview/")
	if _, rest, ok := ticketOf(pr.In); ok {
		path = "/" + rest // the ticket is the bot's, never the dev server's
	}
	raw := ""
	pr.Out.URL.Scheme, pr.Out.URL.Host = "http", task+previewHost
	pr.Out.URL.Path, pr.Out.URL.RawPath = path, raw
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

// modifyPreviewResponse keeps the dev server from setting cookies on the
// bot's domain and runs its pages in an opaque origin.
func modifyPreviewResponse(resp *http.Response) error {
	resp.Header.Del("Set-Cookie")
	resp.Header.Del("Set-Cookie2")
	resp.Header.Del("Clear-Site-Data")
	resp.Header.Del("Service-Worker-Allowed")
	resp.Header.Add("Content-Security-Policy", previewPolicy)
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	resp.Header.Set("Referrer-Policy", "no-referrer")
	resp.Header.Set("Cache-Control", "private, no-store")
	return nil
}

func (p *previewProxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	if errors.Is(err, dispatch.ErrNoPreview) || errors.Is(err, dispatch.ErrNotFound) {
		http.Error(w, "no preview: this run offers no dev server (none configured, or it has ended)", http.StatusNotFound)
		return
	}
	p.lp.log.Debug().Err(err).Str("task_id", r.PathValue("task")).Msg("preview: the dev server did not answer")
	http.Error(w, "the run's dev server did not answer (it may not be up yet)", http.StatusBadGateway)
}
