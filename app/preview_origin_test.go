package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestPreviewOriginOfItsOwn: with a preview domain, the signed-in page
// hands the browser over to the run's own host with a code good once,
// which becomes a cookie of that host alone; the app sees its paths as
// they are, the bot's origin serves no preview, and a preview host serves
// nothing of the bot's.
func TestPreviewOriginOfItsOwn(t *testing.T) {
	t.Parallel()
	f, dev, task := startPreview(t, "SANDBOX_PREVIEW_DOMAIN", "preview.test")
	alice := f.signedInClient("alice")
	bot := strings.TrimPrefix(f.http.URL, "http://")
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); strings.HasSuffix(host, ".preview.test") {
			addr = bot
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	alice.Transport = tr
	var handOff string
	alice.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.Contains(req.URL.Path, "hand-off") {
			handOff = req.URL.String()
		}
		return nil
	}
	resp, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/assets/app.js?v=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	host := resp.Request.URL.Hostname()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(host, strings.ToLower(task)+"-") || !strings.HasSuffix(host, ".preview.test") || len(host) < 40 {
		t.Fatalf("the preview answers %d at %s; want 200 at an unguessable host of the run's under preview.test", resp.StatusCode, resp.Request.URL)
	}
	dev.mu.Lock()
	last := dev.paths[len(dev.paths)-1]
	dev.mu.Unlock()
	if last != "/assets/app.js" {
		t.Errorf("the dev server was asked for %q, want the path as the app wrote it", last)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "sandbox") {
		t.Errorf("a preview of its own origin needs no CSP sandbox: %q", csp)
	}
	origin := "http://" + resp.Request.URL.Host
	wantNothingBeyond(t, alice, origin+"/")
	// The host's cookie is its own, and HttpOnly.
	for _, c := range alice.Jar.Cookies(resp.Request.URL) {
		if c.Name == sessionCookie {
			t.Errorf("the dashboard's session cookie reaches the preview host")
		}
	}
	// The code is good once.
	fresh := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if r, err := fresh.Get(handOff); err != nil || r.StatusCode != http.StatusForbidden {
		t.Errorf("a hand-off code used twice: %v %v, want 403", r.StatusCode, err)
	}
	// Without the cookie the preview host sends the browser back through
	// sign-in; a host with a wrong MAC is nobody's.
	if r, err := fresh.Get(origin + "/cart"); err != nil || r.StatusCode != http.StatusFound || !strings.HasPrefix(r.Header.Get("Location"), f.http.URL+"/runs/"+task+"/preview/cart") {
		t.Errorf("no cookie: %v %v %q, want a redirect through the run's page", r.StatusCode, err, r.Header.Get("Location"))
	}
	forged := strings.Replace(origin, strings.ToLower(task)+"-", strings.ToLower(task)+"-a", 1)
	if r, err := fresh.Get(forged + "/"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("a forged label: %v %v, want 404", r.StatusCode, err)
	}
	// The preview host is the app's alone: the bot's pages are not there.
	if _, body, _ := testenv.Get(t, alice, origin+"/dashboard"); !strings.Contains(body, "dev page /dashboard") {
		t.Errorf("/dashboard on the preview host: %q, want the dev server's page", body)
	}
	// The hand-off goes on only to a path of the preview host: a path that
	// a browser reads as another host ("/\t/x" is "//x") goes to "/".
	aliceNoFollow := *alice
	aliceNoFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, p := range []string{"%09/elsewhere.example", "%5C/elsewhere.example", "%0A/elsewhere.example"} {
		r, err := aliceNoFollow.Get(f.http.URL + "/runs/" + task + "/preview/" + p)
		if err != nil || r.StatusCode != http.StatusFound || !strings.Contains(r.Header.Get("Location"), handOffPath) {
			t.Fatalf("preview path %s: %v %v %q, want a hand-off", p, r.StatusCode, err, r.Header.Get("Location"))
		}
		// The transport, not the client: a client refuses to read such a
		// Location at all, a browser follows it.
		req, _ := http.NewRequest("GET", r.Header.Get("Location"), nil)
		r, err = tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/" {
			t.Errorf("the hand-off of path %s goes on to %q, want /", p, r.Header.Get("Location"))
		}
	}
	// The bot's origin serves no preview: a ticket URL is handed over too.
	if r, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/~forged/cart"); err != nil || r.Request.URL.Host == strings.TrimPrefix(f.http.URL, "http://") {
		t.Errorf("a ticket URL on the bot's origin: %v %v, want the preview's own host", r.Request.URL, err)
	}
}

// TestPreviewDomainMustBeAnotherSite: a preview domain under the bot's own
// site would share cookies and SameSite requests with the dashboard.
func TestPreviewDomainMustBeAnotherSite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		domain, public string
		signIn         bool
		want           string
	}{
		{"preview.example.com", "https://bot.example.com", true, "same site"},
		{"preview.example-previews.com", "https://bot.example.com", true, ""},
		{"previews.test", "http://127.0.0.1:8080", true, ""},
		{"*.example-previews.com", "https://bot.example.com", true, "not a DNS name"},
		{"https://p.example-previews.com", "https://bot.example.com", true, "not a DNS name"},
		{"p.example-previews.com", "https://bot.example.com", false, "sign-in"},
	} {
		err := checkPreviewDomain(c.domain, c.public, c.signIn)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s beside %s: %v, want %q", c.domain, c.public, err, c.want)
		}
	}
}

// TestPreviewLimitsWaitThenRefuse: a run's slots are handed out, a request
// over them waits its turn for a while, and past the queue it is refused
// at once.
func TestPreviewLimitsWaitThenRefuse(t *testing.T) {
	t.Parallel()
	l := newPreviewLimits(previewBounds{perRun: 2, perViewer: 2, queue: 1, wait: time.Minute})
	ctx := t.Context()
	r1, err1 := l.enter(ctx, "T-1", "a")
	r2, err2 := l.enter(ctx, "T-1", "b")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	waited := make(chan error, 1)
	go func() {
		r, err := l.enter(ctx, "T-1", "c")
		if err == nil {
			r()
		}
		waited <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		w := l.slots["r\x00T-1"].waiting
		l.mu.Unlock()
		if w == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third request never waited")
		}
	}
	if _, err := l.enter(ctx, "T-1", "d"); !errors.Is(err, errPreviewBusy) {
		t.Errorf("past the queue: %v, want refused at once", err)
	}
	r1()
	if err := <-waited; err != nil {
		t.Errorf("the waiting request: %v, want a slot once one was free", err)
	}
	r2()
	if _, err := l.enter(ctx, "T-2", "a"); err != nil {
		t.Errorf("another run: %v", err)
	}
}

// A viewer's requests to a run past the burst are over the rate, before
// any slot is asked for; another viewer of the run, and the same viewer of
// another run, have buckets of their own.
func TestPreviewRate(t *testing.T) {
	l := newPreviewLimits(previewBounds{perRun: 1, perViewer: 1, queue: 1, wait: time.Second, rate: 0.001, burst: 3})
	for i := range 3 {
		if l.overRate("T-1", "ticket:alice") {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	if !l.overRate("T-1", "ticket:alice") {
		t.Error("the fourth request passed a burst of 3")
	}
	if l.overRate("T-1", "ticket:bob") || l.overRate("T-2", "ticket:alice") {
		t.Error("another viewer or another run shares alice's bucket on T-1")
	}
	if n := len(l.slots); n != 0 {
		t.Errorf("%d slot gates made by rate checks", n)
	}
}
