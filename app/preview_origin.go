package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Origin mode. With a preview domain (SANDBOX_PREVIEW_DOMAIN, wildcard DNS
// and TLS by the operator) each live preview is served at a host of its
// own, <task-id>-<mac>.<domain>: an origin that shares nothing with the
// dashboard's, so the app runs as it would on its own (absolute paths
// such as Vite's /assets/... work) without a CSP sandbox. The label's MAC
// makes the host unguessable and lets any replica read the run back from
// it. The viewer's access is checked on the dashboard's origin (their
// session); the browser is then sent to the preview's host with a code
// good for one use and previewCodeTTL, which the preview host exchanges
// for a cookie of its own host alone (no Domain), HttpOnly, good for
// previewTicketTTL. Nothing of the dashboard's (its session cookie) ever
// reaches a preview host, and the bot's origin serves no preview.

// previewCodeTTL bounds a hand-off code.
const previewCodeTTL = time.Minute

// handOffPath is the preview host's own path that takes a code; the dev
// server never sees it.
const handOffPath = "/.sandbox-preview/hand-off"

// previewOrigin serves previews at hosts of their own.
type previewOrigin struct {
	domain string // "preview.example.com"
	scheme string // the public URL's
	port   string // ":8443" when the public URL names one
	public string // the public URL, for the way back through sign-in
	key    []byte // the labels' MAC key
	si     *signIn
	p      *previewProxy

	mu   sync.Mutex
	used map[string]time.Time // codes exchanged, until they expire
}

// previewCode is a hand-off: which run, for whom, where to go, until when.
type previewCode struct {
	Task    string    `json:"task"`
	Viewer  string    `json:"viewer"`
	Path    string    `json:"path"`
	Expires time.Time `json:"exp"`
}

// checkPreviewDomain is the start-time check of SANDBOX_PREVIEW_DOMAIN:
// a DNS name under which previews get hosts of their own, of another site
// than the bot's public URL. A preview's scripts can set cookies for their
// whole registrable domain, and browsers send a site's SameSite cookies
// with its requests: a preview domain under the bot's own site would share
// both with the dashboard.
func checkPreviewDomain(domain, public string, signIn bool) error {
	if domain == "" {
		return nil
	}
	if !signIn || public == "" {
		return errors.New("SANDBOX_PREVIEW_DOMAIN: needs SANDBOX_PUBLIC_URL and GitHub sign-in (GITHUB_OAUTH_CLIENT_ID, GITHUB_OAUTH_CLIENT_SECRET): previews are handed over from the signed-in page")
	}
	if strings.Contains(domain, "://") || strings.ContainsAny(domain, "/:*") || net.ParseIP(domain) != nil || !strings.Contains(domain, ".") {
		return fmt.Errorf("SANDBOX_PREVIEW_DOMAIN: %q is not a DNS name such as preview.example-previews.com (no scheme, port, path or *.)", domain)
	}
	for _, l := range strings.Split(domain, ".") {
		if !hostLabel(l) {
			return fmt.Errorf("SANDBOX_PREVIEW_DOMAIN: %q: %q is not a DNS label", domain, l)
		}
	}
	u, err := url.Parse(public)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("SANDBOX_PUBLIC_URL: %q is not a URL", public)
	}
	if net.ParseIP(u.Hostname()) != nil {
		return nil // an address is a site of its own
	}
	ps, _ := publicsuffix.EffectiveTLDPlusOne(strings.ToLower(domain))
	pu, _ := publicsuffix.EffectiveTLDPlusOne(strings.ToLower(u.Hostname()))
	if ps != "" && ps == pu {
		return fmt.Errorf("SANDBOX_PREVIEW_DOMAIN: %s is of the same site (%s) as SANDBOX_PUBLIC_URL %s: a preview's scripts could set cookies the dashboard reads "+
			"and send its SameSite cookies; use a domain of its own (as github.com uses githubusercontent.com)", domain, ps, public)
	}
	return nil
}

func hostLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func newPreviewOrigin(p *previewProxy, si *signIn, domain, public, secret string) *previewOrigin {
	u, _ := url.Parse(public)
	o := &previewOrigin{domain: strings.ToLower(domain), scheme: u.Scheme, public: strings.TrimSuffix(public, "/"), si: si, p: p, used: map[string]time.Time{}}
	if port := u.Port(); port != "" {
		o.port = ":" + port
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("sandbox-bot preview label v1"))
	o.key = mac.Sum(nil)
	return o
}

var labelEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// label is the run's host label: its task id and 130 bits of MAC.
func (o *previewOrigin) label(task string) string {
	mac := hmac.New(sha256.New, o.key)
	mac.Write([]byte(task))
	return strings.ToLower(task) + "-" + strings.ToLower(labelEncoding.EncodeToString(mac.Sum(nil))[:26])
}

// taskOf reads the run back from a request's host; "" when the host is
// not a preview's or its MAC is wrong.
func (o *previewOrigin) taskOf(host string) string {
	h := strings.ToLower(host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	label, ok := strings.CutSuffix(h, "."+o.domain)
	if !ok || strings.Contains(label, ".") || len(label) < 11 {
		return ""
	}
	task := strings.ToUpper(label[:10])
	if !dispatch.ValidTaskID(task) || !hmac.Equal([]byte(o.label(task)), []byte(label)) {
		return ""
	}
	return task
}

// isPreviewHost reports whether a request is addressed to the preview
// domain at all (a valid label or not): such requests never reach the
// dashboard.
func (o *previewOrigin) isPreviewHost(host string) bool {
	h := strings.ToLower(host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return strings.HasSuffix(h, "."+o.domain)
}

// cookieName is the preview host's cookie: __Host- (host-only, Secure,
// Path=/) over https, which a cookie set for the whole domain cannot
// shadow.
func (o *previewOrigin) cookieName() string {
	if o.scheme == "https" {
		return "__Host-sandbox_preview"
	}
	return "sandbox_preview"
}

// handOff sends a person whose access the dashboard's origin has checked
// to the run's preview host with a fresh code.
func (o *previewOrigin) handOff(w http.ResponseWriter, r *http.Request, task, login string) {
	path := "/" + strings.TrimPrefix(r.URL.Path, "/runs/"+task+"/preview/")
	if _, rest, ok := ticketOf(r); ok {
		path = "/" + rest
	}
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	code, err := o.si.seal(previewCode{Task: task, Viewer: login, Path: path, Expires: time.Now().Add(previewCodeTTL)})
	if err != nil {
		http.Error(w, "preview hand-off: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, o.scheme+"://"+o.label(task)+"."+o.domain+o.port+handOffPath+"?code="+url.QueryEscape(code), http.StatusFound)
}

// serve answers every request to a preview host.
func (o *previewOrigin) serve(w http.ResponseWriter, r *http.Request) {
	task := o.taskOf(r.Host)
	if task == "" {
		http.Error(w, "no such preview", http.StatusNotFound)
		return
	}
	if r.URL.Path == handOffPath {
		o.exchange(w, r, task)
		return
	}
	var who string
	for _, c := range r.Cookies() {
		var t previewTicket
		// A page's script may set cookies of this name for the whole
		// preview domain: only a sealed one for this run counts.
		if c.Name == o.cookieName() && o.si.open(c.Value, &t) == nil && t.Task == task && time.Now().Before(t.Expires) {
			who = "cookie:" + t.Viewer
			break
		}
	}
	if who == "" {
		// Back through the dashboard's session check for a new code.
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, o.public+"/runs/"+task+"/preview"+r.URL.RequestURI(), http.StatusFound)
		return
	}
	o.p.forwardLive(w, r, task, who, "")
}

// exchange takes a hand-off code once, sets the host's cookie and goes on
// to the page the person asked for.
func (o *previewOrigin) exchange(w http.ResponseWriter, r *http.Request, task string) {
	raw := r.URL.Query().Get("code")
	var c previewCode
	if o.si.open(raw, &c) != nil || c.Task != task || time.Now().After(c.Expires) || !o.useOnce(raw, c.Expires) {
		http.Error(w, "this preview link has been used or has expired: open the preview again from the run's page", http.StatusForbidden)
		return
	}
	sealed, err := o.si.seal(previewTicket{Task: task, Viewer: c.Viewer, Expires: time.Now().Add(previewTicketTTL)})
	if err != nil {
		http.Error(w, "preview hand-off: "+err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: o.cookieName(), Value: sealed, Path: "/", MaxAge: int(previewTicketTTL.Seconds()),
		HttpOnly: true, Secure: o.scheme == "https", SameSite: http.SameSiteLaxMode})
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	next := c.Path
	if !strings.HasPrefix(next, "/") || !sameOriginRef(next) {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusFound)
}

// useOnce records a code's use; false when it was used before. Codes are
// kept until they expire, so the record stays as small as a minute's
// hand-offs. (Per replica: see docs/operating.md's known limits.)
func (o *previewOrigin) useOnce(code string, expires time.Time) bool {
	sum := sha256.Sum256([]byte(code))
	k := string(sum[:])
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if len(o.used) > 1024 {
		for k, exp := range o.used {
			if now.After(exp) {
				delete(o.used, k)
			}
		}
	}
	if _, seen := o.used[k]; seen {
		return false
	}
	o.used[k] = expires
	return true
}

// previewHosts routes the requests addressed to the preview domain to the
// preview origin, and everything else to next (the dashboard's origin).
func (o *previewOrigin) previewHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.isPreviewHost(r.Host) {
			o.serve(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
