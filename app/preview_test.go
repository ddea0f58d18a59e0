package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit"
)

// previewBackend is the in-memory backend with a dev server offered the
// way the sandbox offers it: the init's forwarder (sandboxinit) on a Unix
// socket, to a dev server on loopback.
type previewBackend struct {
	*backendtest.Memory
	socket string
}

func (b previewBackend) DialPreview(ctx context.Context, taskID string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", b.socket)
}

// devServer records what reached it and answers with a page that tries to
// set a cookie.
type devServer struct {
	mu      sync.Mutex
	headers []http.Header
	paths   []string
	port    int
}

// hostileHeaders are what a dev server could answer to act beyond its
// response, on the bot's origin or the viewer's browser.
var hostileHeaders = map[string]string{
	"NEL": `{"report_to":"agent","max_age":86400}`, "Report-To": `{"group":"agent","max_age":86400,"endpoints":[{"url":"https://agent.example/"}]}`,
	"Alt-Svc": `h3=":443"`, "Strict-Transport-Security": "max-age=31536000; includeSubDomains", "Clear-Site-Data": `"*"`,
	"Service-Worker-Allowed": "/", "Access-Control-Allow-Credentials": "true", "X-Made-Up": "anything",
}

func startPreview(t testing.TB, env ...string) (*dashFixture, *devServer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dev := &devServer{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dev.mu.Lock()
		dev.headers = append(dev.headers, r.Header.Clone())
		dev.paths = append(dev.paths, r.URL.Path)
		dev.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "sandbox_session", Value: "planted", Path: "/"})
		switch r.URL.Path {
		case "/asset.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, "document.body.dataset.ran = 'yes';")
		case "/pixel.png":
			w.Header().Set("Content-Type", "image/png")
		case "/trickle":
			// An answer that takes 3 s to write, a byte each 100 ms.
			w.WriteHeader(http.StatusOK)
			for range 30 {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				http.NewResponseController(w).Flush()
				time.Sleep(100 * time.Millisecond)
			}
		case "/ws":
			// A real switch of protocols, then the same trickle.
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			buf.Flush()
			for range 30 {
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		case "/hang":
			<-r.Context().Done() // a dev server that never answers
		case "/moved":
			http.Redirect(w, r, "/cart", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		default:
			// What would act beyond this response, and a 103 before it.
			w.Header().Set("Link", "</asset.js>; rel=preload; as=script")
			w.WriteHeader(http.StatusEarlyHints)
			for k, v := range hostileHeaders {
				w.Header().Set(k, v)
			}
			fmt.Fprintf(w, "<h1>dev page %s</h1><img src=\"pixel.png\"><script src=\"asset.js\"></script>", r.URL.Path)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go sandboxinit.ServePreview(ctx, zerolog.Nop(), dir, dev.port)
	sock := filepath.Join(dir, dispatch.PreviewSocket)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the preview socket did not appear")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := newDashFixture(t)
	f.env = map[string]string{}
	for i := 0; i+1 < len(env); i += 2 {
		f.env[env[i]] = env[i+1]
	}
	mem := backendtest.NewMemory()
	f.backend = previewBackend{Memory: mem, socket: sock}
	f.start()
	const task = "T-0E0E0E01"
	order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha", Number: 3,
		CloneURL: "https://example.invalid/octo/alpha.git", BaseBranch: "main", BudgetUSD: 1, TimeoutMinutes: 5}
	if _, err := mem.Submit(t.Context(), dispatch.RunSpec{Meta: dispatch.Meta{TaskID: task, Mode: dispatch.ModePlan, Repo: "octo/alpha",
		RepoID: f.ids["octo/alpha"], Number: 3, InstallationID: 1}, Order: order}); err != nil {
		t.Fatal(err)
	}
	return f, dev, task
}

// TestPreviewProxyKeepsTheViewerToItself: the dev server gets the request
// without the viewer's cookies or identity, cannot set a cookie, its page
// runs sandboxed, and only people who may see the run reach it, only while
// it lives.
func TestPreviewProxyKeepsTheViewerToItself(t *testing.T) {
	t.Parallel()
	f, dev, task := startPreview(t)
	alice := f.signedInClient("alice")
	req, _ := http.NewRequest("GET", f.http.URL+"/runs/"+task+"/preview/cart?x=1", nil)
	req.Header.Set("Authorization", "Bearer secret-of-alice")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("Accept-Language", "fr-CH")
	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "dev page /cart") {
		t.Fatalf("preview: %d %q, want the dev server's /cart", resp.StatusCode, body)
	}
	if resp.Header.Get("Set-Cookie") != "" || !strings.Contains(strings.Join(resp.Header.Values("Content-Security-Policy"), ";"), "sandbox allow-scripts") {
		t.Errorf("preview response headers %v: want no Set-Cookie and a CSP sandbox", resp.Header)
	}
	wantNothingBeyond(t, alice, resp.Request.URL.String())
	// Redirects stay within the preview.
	if r, err := alice.Get(strings.Replace(resp.Request.URL.String(), "/cart", "/moved", 1)); err != nil || r.Request.URL.Path == "/cart" ||
		!strings.HasSuffix(r.Request.URL.Path, "/cart") {
		t.Errorf("a dev server's redirect to /cart led to %v (%v), want the preview's /cart", r.Request.URL, err)
	}
	noFollow := *alice
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if r, err := noFollow.Get(strings.Replace(resp.Request.URL.String(), "/cart", "/away", 1)); err != nil || r.Header.Get("Location") != "" {
		t.Errorf("a dev server's redirect to another site went through: %v %v", r.Header, err)
	}
	dev.mu.Lock()
	got := dev.headers[len(dev.headers)-1]
	dev.mu.Unlock()
	for _, h := range []string{"Cookie", "Authorization", "X-Forwarded-For", "Forwarded", "Accept-Language", "Referer"} {
		if got.Get(h) != "" {
			t.Errorf("the dev server got %s: %q", h, got.Get(h))
		}
	}
	if ua := got.Get("User-Agent"); ua != "sandbox-bot-preview" {
		t.Errorf("the dev server learned the browser: User-Agent %q", ua)
	}
	bob := f.signedInClient("bob")
	if resp, err := bob.Get(f.http.URL + "/runs/" + task + "/preview/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob, who cannot read octo/alpha: %v %v, want 404", resp.StatusCode, err)
	}
	f.backend.(previewBackend).Finish(task, &dispatch.Result{TaskID: task, Status: dispatch.StatusCompleted})
	// The run's state is cached for runCacheTTL: the end shows that late.
	for deadline := time.Now().Add(runCacheTTL + 5*time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/")
		if err == nil && resp.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the run: %v %v, want 404 within %s", resp.StatusCode, err, runCacheTTL)
		}
	}
}

// BenchmarkPreviewProxy: a GET of the dev server's page through the bot
// (sign-in cookie, access check, proxy, the init's socket forwarder)
// beside the same GET straight to the dev server, alternating; it prints
// p50 and p99 of both and the p99 the proxy adds (goal ≤ 5 ms).
func BenchmarkPreviewProxy(b *testing.B) {
	f, dev, task := startPreview(b)
	alice := f.signedInClient("alice")
	direct := &http.Client{}
	get := func(c *http.Client, url string) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	proxied, floor := f.http.URL+"/runs/"+task+"/preview/", fmt.Sprintf("http://127.0.0.1:%d/", dev.port)
	get(alice, proxied) // warm connections both ways
	get(direct, floor)
	var through, straight []time.Duration
	b.ResetTimer()
	for range b.N {
		through = append(through, get(alice, proxied))
		straight = append(straight, get(direct, floor))
	}
	b.StopTimer()
	pct := percentileMs
	b.ReportMetric(pct(through, 0.5), "proxy-p50-ms")
	b.ReportMetric(pct(through, 0.99), "proxy-p99-ms")
	b.ReportMetric(pct(straight, 0.5), "direct-p50-ms")
	b.ReportMetric(pct(straight, 0.99), "direct-p99-ms")
	b.ReportMetric(pct(through, 0.99)-pct(straight, 0.99), "added-p99-ms")
	b.Logf("load average at the end: %s (the preview's bounds on: %+v)", loadAverage(), defaultPreviewBounds)
}

// TestPreviewPageLoadsItsOwnAssetsInChromium: the preview's page runs in
// a CSP sandbox (an opaque origin), and still loads what it links by
// relative path through the bot.
func TestPreviewPageLoadsItsOwnAssetsInChromium(t *testing.T) {
	t.Parallel()
	f, dev, task := startPreview(t)
	ctx := browser(t)
	f.gh.SignInAs("alice")
	if err := chromedp.Do(ctx, chromedp.Navigate(f.http.URL+"/runs/"+task+"/preview/")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		dev.mu.Lock()
		paths := slices.Clone(dev.paths)
		dev.mu.Unlock()
		if slices.Contains(paths, "/asset.js") && slices.Contains(paths, "/pixel.png") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev server was asked for %v; want the page's script and image too", paths)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantNothingBeyond fetches url and fails on a 1xx or a header of the
// dev server's that would act beyond its response.
func wantNothingBeyond(t *testing.T, c *http.Client, url string) {
	t.Helper()
	resp, _, early := testenv.Get(t, c, url)
	if len(early) > 0 {
		t.Errorf("informational responses %v reached the browser", early)
	}
	for k := range hostileHeaders {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("the dev server's %s reached the browser: %q", k, v)
		}
	}
}

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

// BenchmarkHealthzDuringPreviewFlood: the bot's /healthz while a page
// holding a leaked preview ticket floods the preview (200 loops of page
// requests and 100 of upgrade requests the dev server never answers),
// beside /healthz with no flood, in alternating rounds: p99 of both and
// their ratio (goal ≤ 1.5), with the load average.
func BenchmarkHealthzDuringPreviewFlood(b *testing.B) {
	f, _, task := startPreview(b)
	alice := f.signedInClient("alice")
	resp, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	page := resp.Request.URL.String()
	health := &http.Client{Timeout: 10 * time.Second}
	probe := func() time.Duration {
		start := time.Now()
		r, err := health.Get(f.http.URL + "/healthz")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return time.Since(start)
	}
	flood := func(ctx context.Context) *sync.WaitGroup {
		var wg sync.WaitGroup
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
		for i := range 300 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
					if i%3 == 0 {
						req, _ = http.NewRequestWithContext(ctx, http.MethodGet, page+"hang", nil)
						req.Header.Set("Connection", "Upgrade")
						req.Header.Set("Upgrade", "websocket")
					}
					if r, err := c.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, r.Body)
						r.Body.Close()
					}
				}
			}()
		}
		return &wg
	}
	var idle, flooded []time.Duration
	var loads []string
	b.ResetTimer()
	for range b.N {
		for range 50 {
			idle = append(idle, probe())
		}
		loads = append(loads, loadAverage())
		ctx, cancel := context.WithCancel(context.Background())
		wg := flood(ctx)
		time.Sleep(200 * time.Millisecond) // the flood under way before the first probe
		for range 50 {
			flooded = append(flooded, probe())
			time.Sleep(10 * time.Millisecond)
		}
		loads = append(loads, loadAverage())
		cancel()
		wg.Wait()
	}
	b.StopTimer()
	pct := percentileMs
	b.ReportMetric(pct(idle, 0.99), "idle-p99-ms")
	b.ReportMetric(pct(flooded, 0.99), "flood-p99-ms")
	b.ReportMetric(pct(flooded, 0.99)/pct(idle, 0.99), "x-idle")
	b.Logf("load average during the rounds: %s", strings.Join(loads, " | "))
}

// loadAverage is the machine's 1, 5 and 15 minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// percentileMs is the p-th percentile of d in milliseconds.
func percentileMs(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}

// TestPreviewDeadlinesLiftOnlyAfterA101: behind a listener whose write
// timeout is 1 s, a request that merely asks for an upgrade keeps the
// timeout (a 3 s answer is cut), while a WebSocket the dev server really
// switches to outlives it.
func TestPreviewDeadlinesLiftOnlyAfterA101(t *testing.T) {
	t.Parallel()
	f, _, task := startPreview(t)
	alice := f.signedInClient("alice")
	resp, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := resp.Request.URL.Path // under the ticket
	slow := httptest.NewUnstartedServer(f.srv.Load().Handler())
	slow.Config.WriteTimeout = time.Second
	slow.Start()
	t.Cleanup(slow.Close)
	get := func(path string) int {
		c, err := net.Dial("tcp", slow.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
			page+path, slow.Listener.Addr())
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		b, _ := io.ReadAll(c)
		_, body, _ := strings.Cut(string(b), "\r\n\r\n")
		return strings.Count(body, "x")
	}
	if n := get("trickle"); n >= 30 {
		t.Errorf("a request asking for an upgrade that got none was written for 3 s past the listener's 1 s timeout (%d of 30 bytes)", n)
	}
	if n := get("ws"); n != 30 {
		t.Errorf("a WebSocket the dev server switched to got %d of 30 bytes; want all of them past the listener's timeout", n)
	}
}
