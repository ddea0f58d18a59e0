package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The agent, its dev server and its browser as adversaries of the people
// who watch: what reaches the browser through a preview or a screencast,
// and what a page can cost the bot.

// hostileServerJS is a dev server written by a hostile agent: /probe tries
// what its own run hides (the provider keys' file, the init's and every
// readable process's environment, cloud metadata, the bot's listener by
// address and by the Docker host's name, an operator-denied network), the
// page answers with headers that would act beyond it and a 103, /hang never
// answers, /stop tells the agent's command to finish.
func hostileServerJS(gw string, botPort, denyPort int, wall hostWallProbe) string {
	return fmt.Sprintf(`const fs = require('fs'), net = require('net'), http = require('http');
const GW = %q, BOT = %d, DENY = %d, HOST = %d, OTHER = %q, ALLOW = %d;
const read = p => { try { return 'read ' + fs.readFileSync(p, 'latin1') } catch (e) { return e.code } };
const list = p => { try { return fs.readdirSync(p).join(',') } catch (e) { return e.code } };
const dial = (host, port) => new Promise(done => {
  const s = net.connect({host, port}); const t = setTimeout(() => { s.destroy(); done('timeout') }, 3000);
  s.on('connect', () => { clearTimeout(t); s.destroy(); done('connected') });
  s.on('error', e => { clearTimeout(t); done(e.code) });
});
const environs = () => fs.readdirSync('/proc').filter(d => /^\d+$/.test(d)).map(d => read('/proc/' + d + '/environ')).filter(v => v.startsWith('read ')).join('\n');
async function probe() {
  return { uid: process.getuid(), gateway: read('/sandbox/secrets/gateway/providers.json'), secrets: list('/sandbox/secrets'),
    init: read('/proc/1/environ'), environs: environs(), env: JSON.stringify(process.env),
    metadata: await dial('169.254.169.254', 80), bot: await dial(GW, BOT), botByName: await dial('host.docker.internal', BOT),
    denied: await dial(GW, DENY),
    hostGW: await dial(GW, HOST), hostByName: await dial('host.docker.internal', HOST),
    hostOther: OTHER ? await dial(OTHER, HOST) : 'no other address', allowed: await dial(GW, ALLOW) };
}
http.createServer(async (q, s) => {
  const u = q.url.split('?')[0];
  if (u === '/probe') { s.setHeader('content-type', 'application/json'); s.end(JSON.stringify(await probe())); return; }
  if (u === '/assets/app.js') { s.setHeader('content-type', 'text/javascript'); s.end('document.getElementById("assets").textContent = "assets loaded";'); return; }
  if (u === '/hang') return;
  if (u === '/stop') { fs.writeFileSync('/tmp/stop-agent', ''); s.end('stopping'); return; }
  s.writeEarlyHints({ link: '</assets/app.js>; rel=preload; as=script' });
  s.setHeader('NEL', '{"report_to":"agent","max_age":86400,"success_fraction":1}');
  s.setHeader('Report-To', '{"group":"agent","max_age":86400,"endpoints":[{"url":"http://' + GW + ':9/"}]}');
  s.setHeader('Alt-Svc', 'h3=":443"; ma=86400');
  s.setHeader('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
  s.setHeader('Set-Cookie', 'sandbox_session=planted; Path=/');
  s.setHeader('content-type', 'text/html');
  s.end(fs.readFileSync('page.html'));
}).listen(process.env.PORT || %d, '127.0.0.1');
`, gw, botPort, denyPort, wall.hostPort, wall.other, wall.allowPort, uiDevPort)
}

// hostWallProbe is what the hostile dev server tries of the machine it
// runs on: a port listening on every address of the host, through the
// bridge gateway, host.docker.internal and another address of the host's,
// and a port the operator lists in SANDBOX_HOST_ALLOW.
type hostWallProbe struct {
	hostPort, allowPort int
	other, allowAddr    string
}

// hostWallServers starts what hostWallProbe names: a service on every
// address of the host and one on the bridge gateway for SANDBOX_HOST_ALLOW,
// each counting its connections.
func hostWallServers(t *testing.T) (hostWallProbe, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	hostAddr, hostHits := dockertest.CountConns(t, ":0")
	allowAddr, allowHits := dockertest.ConnCounter(t)
	_, allowPort, _ := net.SplitHostPort(allowAddr)
	w := hostWallProbe{hostPort: hostAddr.(*net.TCPAddr).Port, allowAddr: allowAddr, other: otherHostAddr(t)}
	w.allowPort, _ = strconv.Atoi(allowPort)
	return w, hostHits, allowHits
}

// checkHostWall reads a hostile dev server's probe: the host's service
// refused by the gateway, host.docker.internal and the host's other
// address, and never reached; the listed port reached.
func checkHostWall(t *testing.T, probe string, w hostWallProbe, hostHits, allowHits *atomic.Int64) {
	t.Helper()
	want := []string{`"hostGW":"ECONNREFUSED"`, `"hostByName":"ECONNREFUSED"`, `"allowed":"connected"`}
	if w.other != "" {
		want = append(want, `"hostOther":"ECONNREFUSED"`)
	}
	for _, s := range want {
		if !strings.Contains(probe, s) {
			t.Errorf("the hostile dev server's probe of the host lacks %s:\n%s", s, probe)
		}
	}
	if n := hostHits.Load(); n != 0 {
		t.Errorf("the host's service on every address took %d connections from the sandbox, want none", n)
	}
	// The probe's connect returns once the kernel holds the connection;
	// the counter counts it when its Accept returns, which on a busy
	// machine can be a moment after the probe's answer reached the test.
	for deadline := time.Now().Add(10 * time.Second); allowHits.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if allowHits.Load() == 0 {
		t.Errorf("the host port listed in SANDBOX_HOST_ALLOW took no connection")
	}
}

// otherHostAddr is an IPv4 address of this host that is neither loopback
// nor a Docker bridge's ("" when it has none): the host reached by an
// address other than the gateway.
func otherHostAddr(t *testing.T) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || strings.HasPrefix(i.Name, "docker") || strings.HasPrefix(i.Name, "br-") || strings.HasPrefix(i.Name, "veth") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return ""
}

// vitePage is the dev server's page as Vite's serves one: its script by
// absolute path, as a module.
func vitePage(heading string) string {
	return uiPage(heading, `footer <span id="assets">assets missing</span><script type="module" src="/assets/app.js"></script>`)
}

// hostileDevToolsJS answers on the browser's DevTools port before any
// browser does, with a page whose screencast pushes 100 frames a second
// and never waits for an ack.
func hostileDevToolsJS(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	for i := range img.Pix {
		img.Pix[i] = 200
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`const http = require('http'), crypto = require('crypto');
const msg = JSON.stringify({method: 'Page.screencastFrame', params: {data: %q, sessionId: 1}});
const head = n => n < 126 ? Buffer.from([0x81, n]) : (() => { const h = Buffer.alloc(4); h[0] = 0x81; h[1] = 126; h.writeUInt16BE(n, 2); return h })();
const frame = Buffer.concat([head(Buffer.byteLength(msg)), Buffer.from(msg)]);
const srv = http.createServer((q, s) => {
  s.setHeader('content-type', 'application/json');
  s.end(JSON.stringify([{type: 'page', url: 'http://127.0.0.1:%d/', webSocketDebuggerUrl: 'ws://127.0.0.1:%d/page'}]));
});
srv.on('upgrade', (q, sock) => {
  const accept = crypto.createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  sock.on('data', () => {}); sock.on('error', () => {});
  const t = setInterval(() => { if (sock.writableLength < (8 << 20)) sock.write(frame) }, 10);
  sock.on('close', () => clearInterval(t));
});
srv.listen(%d, '127.0.0.1');
`, base64.StdEncoding.EncodeToString(b.Bytes()), uiDevPort, 9333, 9333)
}

// checkNothingActsBeyond fetches url (a preview's page, with what client
// holds) and fails on any 1xx or header of the dev server's that would act
// beyond the one response.
func checkNothingActsBeyond(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	resp, _, early := testenv.Get(t, c, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s answers %d", url, resp.StatusCode)
	}
	if len(early) > 0 {
		t.Errorf("the browser got informational responses %v from the dev server", early)
	}
	for _, h := range []string{"Nel", "Report-To", "Alt-Svc", "Strict-Transport-Security", "Set-Cookie"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("the dev server's %s reached the browser: %q", h, v)
		}
	}
	return resp
}

// vmKiB reads a field of /proc/<pid>/status, in KiB.
func vmKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// floodPreview sends, for d, what a page holding a leaked ticket can
// send: 150 loops of requests for the page and 150 of requests that ask
// for an upgrade the dev server never answers. Meanwhile the bot's
// /healthz must answer every time, and its memory stay bounded; the
// bounds must have refused some of the flood.
func (l *loop) floodPreview(t *testing.T, page string, d time.Duration) {
	t.Helper()
	pid := l.bot.cmd.Process.Pid
	before := vmKiB(t, pid, "VmRSS")
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 300}
	defer tr.CloseIdleConnections()
	flood := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var ok, busy, other atomic.Int64
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				url := page
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if i%2 == 1 {
					req, _ = http.NewRequestWithContext(ctx, http.MethodGet, page+"hang", nil)
					req.Header.Set("Connection", "Upgrade")
					req.Header.Set("Upgrade", "websocket")
				}
				resp, err := flood.Do(req)
				switch {
				case err != nil:
					other.Add(1)
				case resp.StatusCode == http.StatusOK:
					ok.Add(1)
				case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusTooManyRequests:
					busy.Add(1) // over the slots, or over the ticket's rate
				default:
					other.Add(1)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
		}()
	}
	var failed []string
	health := &http.Client{Timeout: 5 * time.Second}
	for n := 0; ctx.Err() == nil; n++ {
		resp, err := health.Get("http://" + l.addr + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			failed = append(failed, fmt.Sprintf("%v %v", err, resp))
		}
		if resp != nil {
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	peak := vmKiB(t, pid, "VmHWM")
	t.Logf("flood: %d answered, %d refused (busy or over the rate), %d other; bot RSS %d KiB before, peak %d KiB", ok.Load(), busy.Load(), other.Load(), before, peak)
	if len(failed) > 0 {
		t.Errorf("/healthz did not answer %d times during the flood: %v", len(failed), failed[:min(3, len(failed))])
	}
	if busy.Load() == 0 {
		t.Error("no request of the flood was refused: the bounds did not hold")
	}
	if grew := peak - before; grew > 256<<10 {
		t.Errorf("the bot's memory grew by %d MiB during the flood (peak %d KiB); want it bounded", grew>>10, peak)
	}
}

// TestE2EHostileLivePage: a run whose agent binds its browser's DevTools
// port first and pushes 100 frames a second, and whose dev server answers
// with headers that would act on the bot's origin, a 103, and requests it
// never answers. The live page gets at most five frames a second; the
// preview (path mode) passes none of those headers; a flood with the
// preview's ticket leaves /healthz answering and the bot's memory bounded.
// On the docker backend and through the Nomad fake (each connection an
// exec session).
func TestE2EHostileLivePage(t *testing.T) {
	for _, backend := range []string{"docker", "nomad"} {
		t.Run(backend, func(t *testing.T) {
			var backendEnv func(string) []string
			if backend == "nomad" {
				_, backendEnv = nomadFake(t)
			}
			// The machine the run's sandbox runs on, tried by its dev server.
			wall, hostHits, allowHits := hostWallServers(t)
			yml := fmt.Sprintf(`command: |
  node devtools.js > /dev/null 2>&1 &
  while [ ! -e /tmp/stop-agent ]; do sleep 0.2; done
  echo 'HOSTILE-PLAN: nothing to change.'
dev:
  command: node server.js
  port: %d
`, uiDevPort)
			l := startLoop(t, loopOptions{signIn: true, harness: "command", sandboxYML: yml, backendEnv: backendEnv, hostAllow: []string{wall.allowAddr}, files: map[string]string{
				"README.md": "# demo\n", "server.js": hostileServerJS(dockertest.Gateway(t), 1, 1, wall), "devtools.js": hostileDevToolsJS(t), "page.html": uiPage(uiCanary, "footer"),
			}})
			n := l.gh.AddIssue(e2eRepo, e2eWriter, "Look", "Just look.")
			l.label(n)
			l.waitComment(n, "Planning this issue", 30*time.Second)
			task := l.ackedTask(n)
			base := "http://" + l.addr
			_, tab := liveBrowser(t)
			alice := tab()
			if st := l.signedIn(alice, "alice", base+"/runs/"+task); st != http.StatusOK {
				t.Fatalf("the live page answers %d", st)
			}
			waitJS(t, alice, "the hostile port's first frames", `window.liveFrames > 1`, 3*time.Minute)
			// Eight seconds of the page's own clock: at most five frames a
			// second, plus two seconds' worth for frames a busy renderer
			// took in late (the port pushes 100 a second: unpaced, that
			// is some 800).
			waitJS(t, alice, "a measurement window", `(() => { if (!window.paceStart) { window.paceStart = performance.now(); window.paceFrames = window.liveFrames; }
				return performance.now() - window.paceStart >= 8000; })()`, time.Minute)
			got, err := evaluate[[]float64](alice, `[window.liveFrames - window.paceFrames, performance.now() - window.paceStart]`, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if frames, ms := got[0], got[1]; frames > ms/1000*5+10 {
				t.Errorf("%v frames reached the page in %.0f ms from a port pushing 100 a second; want at most five a second", frames, ms)
			} else {
				t.Logf("%v frames reached the page in %.0f ms", frames, ms)
			}

			// The running app through the bot, under the ticket the
			// browser was sent to.
			if st := l.signedIn(alice, "alice", base+"/runs/"+task+"/preview/"); st != http.StatusOK {
				t.Fatalf("the preview answers %d", st)
			}
			page, err := evaluate[string](alice, `location.href`, 10*time.Second)
			if err != nil || !strings.Contains(page, "/preview/~") {
				t.Fatalf("the preview's page is at %q (%v), want a ticket URL", page, err)
			}
			resp := checkNothingActsBeyond(t, http.DefaultClient, page)
			checkHostWall(t, l.previewGet(t, http.DefaultClient, strings.TrimSuffix(page, "/")+"/probe"), wall, hostHits, allowHits)
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
				t.Errorf("the preview's page has no CSP sandbox: %q", csp)
			}
			l.floodPreview(t, page, 6*time.Second)
			// The bounds give the slots back: the preview answers again.
			l.gh.WaitFor(time.Minute, "the preview answering after the flood", func() bool {
				r, err := http.Get(page)
				if err == nil {
					r.Body.Close()
				}
				return err == nil && r.StatusCode == http.StatusOK
			})
			if r, err := http.Get(page + "stop"); err == nil {
				r.Body.Close()
			}
			l.waitComment(n, "HOSTILE-PLAN", 2*time.Minute)
		})
	}
}

// previewDomain is the preview domain of the end-to-end tests: Chromium
// maps it to the bot with --host-resolver-rules, the Go clients with
// their dialer.
const previewDomain = "preview.test"

// previewOriginClient is a browser-like client whose requests for the
// preview domain reach the bot at addr.
func previewOriginClient(addr string) *http.Client {
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(a); strings.HasSuffix(host, "."+previewDomain) {
			a = addr
		}
		return d.DialContext(ctx, network, a)
	}}
	return &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}
}

// previewOriginBrowser is Chromium with the preview domain mapped to the
// bot's address.
func previewOriginBrowser(t *testing.T, botAddr string) func() context.Context {
	host, _, _ := net.SplitHostPort(botAddr)
	_, tab := liveBrowser(t, chromedp.Flag("host-resolver-rules", "MAP *."+previewDomain+" "+host))
	return tab
}
