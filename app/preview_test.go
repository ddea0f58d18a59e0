package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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

func startPreview(t testing.TB) (*dashFixture, *devServer, string) {
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
		default:
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
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(through, 0.5), "proxy-p50-ms")
	b.ReportMetric(pct(through, 0.99), "proxy-p99-ms")
	b.ReportMetric(pct(straight, 0.5), "direct-p50-ms")
	b.ReportMetric(pct(straight, 0.99), "direct-p99-ms")
	b.ReportMetric(pct(through, 0.99)-pct(straight, 0.99), "added-p99-ms")
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
