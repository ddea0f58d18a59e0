package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
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
		case "/slashes":
			// What browsers read as //elsewhere.example: "\\" is "//" in
			// an http URL, and a tab or newline is dropped anywhere.
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(http.StatusFound)
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
	for _, to := range []string{`\\elsewhere.example`, `/\elsewhere.example`, "/\t/elsewhere.example", "\t//elsewhere.example", " //elsewhere.example"} {
		u := strings.Replace(resp.Request.URL.String(), "/cart?x=1", "/slashes?to="+url.QueryEscape(to), 1)
		// The transport, not the client: a client refuses to read such a
		// Location at all, a browser follows it.
		req, _ := http.NewRequest("GET", u, nil)
		for _, c := range alice.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		r, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if loc := r.Header.Get("Location"); loc != "" {
			t.Errorf("a dev server's Location %q reached the browser as %q", to, loc)
		}
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
