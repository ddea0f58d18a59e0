package app

import (
	"net/http"
	"strings"
	"time"
)

// previewResponseHeaders are the only headers of a dev server's response
// that reach the browser: what a page needs to be shown, cached and
// ranged, and a WebSocket's handshake. Everything else stays behind, in
// particular what would act beyond the one response: Set-Cookie,
// Clear-Site-Data, NEL and Report-To (a reporting policy could send the
// bot's later URLs, preview tickets included, to the agent), Alt-Svc,
// Strict-Transport-Security, Service-Worker-Allowed, Link (preloads),
// Access-Control-Allow-Credentials.
var previewResponseHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Content-Range": true,
	"Content-Disposition": true, "Content-Language": true, "Accept-Ranges": true, "Etag": true,
	"Last-Modified": true, "Vary": true, "Date": true, "Retry-After": true, "Allow": true, "Location": true,
	// A page in an opaque origin (path mode) reads its own API cross-origin.
	"Access-Control-Allow-Origin": true, "Access-Control-Allow-Methods": true, "Access-Control-Allow-Headers": true,
	"Access-Control-Expose-Headers": true, "Access-Control-Max-Age": true,
}

// upgradeResponseHeaders are kept on a 101 Switching Protocols only.
var upgradeResponseHeaders = map[string]bool{
	"Upgrade": true, "Connection": true, "Sec-Websocket-Accept": true, "Sec-Websocket-Protocol": true, "Sec-Websocket-Extensions": true,
}

// modifyResponse keeps the allowed headers, adds the preview's own, and
// lifts the listener's deadlines once a WebSocket really is switched to.
func (p *previewProxy) modifyResponse(resp *http.Response) error {
	req, _ := resp.Request.Context().Value(previewReqKey{}).(*previewReq)
	upgraded := resp.StatusCode == http.StatusSwitchingProtocols
	for k := range resp.Header {
		if !previewResponseHeaders[k] && !(upgraded && upgradeResponseHeaders[k]) {
			delete(resp.Header, k)
		}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		if kept, ok := previewLocation(loc, req); ok {
			resp.Header.Set("Location", kept)
		} else {
			resp.Header.Del("Location")
		}
	}
	if req != nil && req.pathMode {
		resp.Header.Set("Content-Security-Policy", previewPolicy)
	}
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	resp.Header.Set("Referrer-Policy", "no-referrer")
	resp.Header.Set("Cache-Control", "private, no-store")
	if upgraded && req != nil {
		// A WebSocket lives as long as the page; the listener's timeouts
		// are for ordinary requests. Only a real 101 lifts them (a request
		// that merely asks for an upgrade keeps them); the tunnel is then
		// bounded by its quiet time (quietConn) and the run's slots.
		_ = req.rc.SetReadDeadline(time.Time{})
		_ = req.rc.SetWriteDeadline(time.Time{})
	}
	return nil
}

// previewLocation keeps a redirect within the preview: a reference
// without scheme or host only (no open redirect on the bot's name), put
// under the preview's path in path mode.
func previewLocation(loc string, req *previewReq) (string, bool) {
	if !sameOriginRef(loc) {
		return "", false
	}
	if req != nil && req.mount != "" && strings.HasPrefix(loc, "/") {
		prefix := req.mount
		if t := req.ticket; t != "" {
			prefix += "/~" + t
		}
		return prefix + loc, true
	}
	return loc, true
}
