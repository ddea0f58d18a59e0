package sandboxinit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestAllowlistMatches(t *testing.T) {
	t.Parallel()
	a, err := newAllowlist([]string{"registry.npmjs.org", "*.GitHub.com", "10.0.0.7", "proxy.golang.org.", "git.corp:8443"},
		alwaysAllowed(&dispatch.WorkOrder{CloneURL: "https://git.example.com/a/b.git"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host    string
		port    uint16
		connect bool
		want    bool
	}{
		{"registry.npmjs.org", 443, true, true},
		{"REGISTRY.npmjs.org.", 443, true, true}, // case and the root dot do not matter
		{"registry.npmjs.org", 80, false, true},  // plain HTTP on its default port
		{"registry.npmjs.org", 8443, true, false},
		{"registry.npmjs.org", 22, true, false},
		{"registry.npmjs.org", 443, false, false}, // plain HTTP to 443 is not HTTPS
		{"npmjs.org", 443, true, false},           // an exact entry covers no other name
		{"evil-registry.npmjs.org", 443, true, false},
		{"api.github.com", 443, true, true},
		{"a.b.github.com", 443, true, true},
		{"github.com", 443, true, false}, // *.domain is subdomains only
		{"notgithub.com", 443, true, false},
		{"github.com.evil.io", 443, true, false},
		{"10.0.0.7", 443, true, true},
		{"10.0.0.8", 443, true, false},
		{"proxy.golang.org", 443, true, true},
		{"git.corp", 8443, true, true},
		{"git.corp", 443, true, false}, // a listed port replaces the defaults
		{"git.example.com", 443, true, true},
		{"", 443, true, false},
	} {
		if g, got := a.allows(c.host, c.port, c.connect); got != c.want {
			t.Errorf("allows(%q, %d, connect=%v) = %v (%s), want %v", c.host, c.port, c.connect, got, g.why, c.want)
		}
	}
	if g, ok := a.allows("git.example.com", 443, true); !ok || g.why != "the clone URL's host git.example.com" || !g.trusted {
		t.Errorf("the clone host is allowed on the wrong grounds: %v %+v", ok, g)
	}
	if g, ok := a.allows("evil.io", 443, true); ok || !strings.Contains(g.why, "network.allow") {
		t.Errorf("denial reason %q does not name network.allow", g.why)
	}
	if g, ok := a.allows("registry.npmjs.org", 8443, true); ok || !strings.Contains(g.why, "list registry.npmjs.org:8443") {
		t.Errorf("a port denial does not say how to allow it: %q", g.why)
	}
}

func TestAllowlistRejectsBadEntries(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"", "*", "*.", "a*.example.com", "*.*.example.com", "user@host", "a/b", "x.com:0", "https://x.com"} {
		_, err := newAllowlist([]string{"ok.example.com", e}, nil, nil)
		if err == nil {
			t.Errorf("entry %q accepted", e)
			continue
		}
		if !strings.Contains(err.Error(), "network.allow[1]") {
			t.Errorf("error for %q does not say which entry: %v", e, err)
		}
	}
}

func TestAlwaysAllowedIsTheCloneHost(t *testing.T) {
	t.Parallel()
	for clone, want := range map[string]string{
		"https://github.com/acme/demo.git":             "github.com",
		"http://host.docker.internal:8080/demo.git":    "host.docker.internal:8080",
		"https://x-access-token@ghe.corp:8443/a/b.git": "ghe.corp:8443",
		"git@github.com:acme/demo.git":                 "github.com:22",
		"http://172.17.0.1:3000/a.git":                 "172.17.0.1:3000",
	} {
		got := alwaysAllowed(&dispatch.WorkOrder{CloneURL: clone})
		if len(got) != 1 || got[0].entry.String() != want || !got[0].trusted {
			t.Errorf("alwaysAllowed(%s) = %+v, want %s", clone, got, want)
		}
	}
	if got := alwaysAllowed(&dispatch.WorkOrder{Mode: dispatch.ModeTask}); len(got) != 0 {
		t.Errorf("task without a repo allows %v", got)
	}
}

// proxyFixture runs the proxy on loopback with a log the test reads.
type proxyFixture struct {
	url *url.URL
	mu  sync.Mutex
	log bytes.Buffer
}

func (f *proxyFixture) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.Write(p)
}

func (f *proxyFixture) logged() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.String()
}

func startProxy(t *testing.T, allow ...string) *proxyFixture {
	t.Helper()
	return startProxyDenying(t, nil, allow...)
}

func startProxyDenying(t *testing.T, deny []dispatch.DenyNet, allow ...string) *proxyFixture {
	t.Helper()
	a, err := newAllowlist(allow, nil, deny)
	if err != nil {
		t.Fatal(err)
	}
	f := &proxyFixture{}
	srv := httptest.NewServer(newEgressProxy(a, zerolog.New(f).Level(zerolog.DebugLevel), nil))
	t.Cleanup(srv.Close)
	f.url, _ = url.Parse(srv.URL)
	return f
}

func (f *proxyFixture) client(tlsCfg *tls.Config) *http.Client {
	// http.ProxyURL, unlike ProxyFromEnvironment, also proxies loopback.
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: tlsCfg}}
}

// An HTTPS request through the proxy is a CONNECT tunnel: TLS is end to
// end, the proxy only checks the host and copies bytes.
func TestProxyTunnelsHTTPS(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.URL.Path)
	}))
	defer upstream.Close()
	p := startProxy(t, upstream.Listener.Addr().String())
	pool := upstream.Client().Transport.(*http.Transport).TLSClientConfig
	resp, err := p.client(pool).Get(upstream.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "secure /hello" {
		t.Fatalf("through the tunnel: %d %q", resp.StatusCode, b)
	}
	if !strings.Contains(p.logged(), `"method":"CONNECT"`) || !strings.Contains(p.logged(), `"message":"egress allowed"`) {
		t.Errorf("allowed CONNECT not logged at debug: %s", p.logged())
	}
}

// Raw bytes in both directions, including what the client sends in the same
// write as the CONNECT line and a half-close at the end.
func TestProxyTunnelCopiesBytesBothWays(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write(bytes.ToUpper(b))
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	// localhost is a private address: listing the name is not enough.
	p := startProxy(t, "localhost:"+port, l.Addr().String())
	c, err := net.Dial("tcp", p.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT localhost:%s HTTP/1.1\r\nHost: localhost:%s\r\n\r\nearly bytes, ", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT answered %s", resp.Status)
	}
	io.WriteString(c, "late bytes")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "EARLY BYTES, LATE BYTES" {
		t.Fatalf("tunnel returned %q", got)
	}
}

func TestProxyDeniesHostsOffTheList(t *testing.T) {
	p := startProxy(t, "*.allowed.test")
	// CONNECT: the client sees the 403 as a proxy error.
	c, err := net.Dial("tcp", p.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "CONNECT exfil.example:443 HTTP/1.1\r\nHost: exfil.example:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "exfil.example is not allowed") || !strings.Contains(string(body), "*.allowed.test") {
		t.Fatalf("CONNECT to a denied host: %s %q", resp.Status, body)
	}
	// Plain HTTP, with a query string that must not reach the log.
	resp, err = p.client(nil).Get("http://allowed.test/?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "allowed.test is not allowed") {
		t.Fatalf("GET of a denied host: %s %q", resp.Status, body)
	}
	log := p.logged()
	for _, want := range []string{`"host":"exfil.example","method":"CONNECT"`, `"host":"allowed.test","method":"GET"`, `"why":"not in network.allow of .sandbox.yml"`, `"message":"egress denied"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "s3cret") {
		t.Error("the URL's query reached the log")
	}
}

// Plain HTTP is forwarded as a request: method, body and headers pass,
// hop-by-hop and proxy headers do not, and the answer streams back.
func TestProxyForwardsPlainHTTP(t *testing.T) {
	type seen struct {
		method, host, body, auth, proxyAuth, xff string
	}
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Host, string(b), r.Header.Get("Authorization"), r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Forwarded-For")}
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "stored")
	}))
	defer upstream.Close()
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	p := startProxy(t, "localhost:"+port, upstream.Listener.Addr().String())

	req, _ := http.NewRequest(http.MethodPost, "http://localhost:"+port+"/git-receive-pack", strings.NewReader("pack data"))
	req.Header.Set("Authorization", "Basic eDp0b2s=")
	req.Header.Set("Proxy-Authorization", "Basic cHJveHk6cHc=")
	resp, err := p.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(b) != "stored" || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("response through the proxy: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	s := <-got
	want := seen{method: "POST", host: "localhost:" + port, body: "pack data", auth: "Basic eDp0b2s="}
	if s != want {
		t.Fatalf("upstream saw %+v, want %+v", s, want)
	}
	// A request that is not for a proxy at all.
	resp, err = http.Get(p.url.String() + "/just/a/path")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form request answered %d, want 400", resp.StatusCode)
	}
}

func TestProxyReportsUnreachableAllowedHost(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p := startProxy(t, addr)
	resp, err := p.client(nil).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("unreachable allowed host answered %d, want 502", resp.StatusCode)
	}
}

func TestProxyEnv(t *testing.T) {
	env := proxyEnv(ProxyAddr, dispatch.Services{"web": "172.18.0.2:8080", "db": "172.18.0.3:5432"})
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if env[k] != "http://127.0.0.1:3128" {
			t.Errorf("%s = %q", k, env[k])
		}
	}
	want := "localhost,127.0.0.1,::1,db,172.18.0.3,web,172.18.0.2"
	if env["NO_PROXY"] != want || env["no_proxy"] != want {
		t.Errorf("NO_PROXY = %q, no_proxy = %q; want %q", env["NO_PROXY"], env["no_proxy"], want)
	}
}

// fakeTables records the rules of every iptables-restore batch, one line
// each prefixed by the family's tool ("iptables :CHAIN - [0:0]",
// "ip6tables -A ...", "iptables -t nat -A ..." for the nat table), answers
// iptables-save with saved, and fails a batch or a save when fail says so
// for one of its lines.
type fakeTables struct {
	cmds  []string
	saved map[string]string // iptables-save output by tool
	fail  func(cmd string) (string, bool)
}

func (f *fakeTables) run(_ context.Context, bin, stdin string, args ...string) ([]byte, error) {
	if strings.HasSuffix(bin, "-save") {
		if f.fail != nil {
			if out, failed := f.fail(bin + " " + strings.Join(args, " ")); failed {
				return []byte(out), errors.New("exit status 1")
			}
		}
		return []byte(f.saved[bin]), nil
	}
	tool := strings.TrimSuffix(bin, "-restore")
	if strings.Join(args, " ") != "--noflush -w 5" {
		return nil, fmt.Errorf("%s %v: want --noflush -w 5", bin, args)
	}
	lines := strings.Split(strings.TrimSuffix(stdin, "\n"), "\n")
	if len(lines) < 2 || (lines[0] != "*filter" && lines[0] != "*nat") || lines[len(lines)-1] != "COMMIT" {
		return nil, fmt.Errorf("%s: batch is not one *filter or *nat table:\n%s", bin, stdin)
	}
	if lines[0] == "*nat" {
		tool += " -t nat"
	}
	for i, l := range lines[1 : len(lines)-1] {
		cmd := tool + " " + l
		if f.fail != nil {
			if out, failed := f.fail(cmd); failed {
				return []byte(fmt.Sprintf("%s\nError occurred at line: %d", out, i+2)), errors.New("exit status 2")
			}
		}
	}
	for _, l := range lines[1 : len(lines)-1] {
		f.cmds = append(f.cmds, tool+" "+l)
	}
	return nil, nil
}

func resolvConf(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFenceRules(t *testing.T) {
	rc := resolvConf(t, "# comment\nnameserver 10.255.255.53\nnameserver fd00::53\noptions ndots:0\n")
	// A fresh namespace: no chain of ours, no jump yet.
	f := &fakeTables{}
	if err := fence(context.Background(), f.run, fenceSpec{uids: []int{1000}, gids: []int{daemonGID}, resolvConf: rc, forward: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"iptables :SANDBOX-EGRESS - [0:0]",
		"iptables -A SANDBOX-EGRESS -o lo -j RETURN",
		"iptables -A SANDBOX-EGRESS -o docker0 -j RETURN",
		"iptables -A SANDBOX-EGRESS -o br-+ -j RETURN",
		"iptables -A SANDBOX-EGRESS -d 10.255.255.53 -p udp --dport 53 -j RETURN",
		"iptables -A SANDBOX-EGRESS -d 10.255.255.53 -p tcp --dport 53 -j RETURN",
		"iptables -A SANDBOX-EGRESS -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-EGRESS -j REJECT",
		"iptables -I OUTPUT 1 -m owner --uid-owner 1000 -j SANDBOX-EGRESS",
		"iptables -I OUTPUT 1 -m owner --gid-owner 2375 -j SANDBOX-EGRESS",
		"iptables :SANDBOX-EGRESS-FWD - [0:0]",
		"iptables -A SANDBOX-EGRESS-FWD -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
		"iptables -A SANDBOX-EGRESS-FWD -o docker0 -j RETURN",
		"iptables -A SANDBOX-EGRESS-FWD -o br-+ -j RETURN",
		"iptables -A SANDBOX-EGRESS-FWD -j REJECT",
		"iptables :DOCKER-USER - [0:0]",
		"iptables -I DOCKER-USER 1 -i br-+ -j SANDBOX-EGRESS-FWD",
		"iptables -I DOCKER-USER 1 -i docker0 -j SANDBOX-EGRESS-FWD",
	}
	if got := strings.Join(f.cmds, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// A second start in the same namespace empties the chains (a chain
// declared in a --noflush batch is flushed), does not add the jumps twice,
// and keeps the inner daemon's DOCKER-USER; IPv6 is fenced when the
// sandbox has it.
func TestFenceReapplies(t *testing.T) {
	f := &fakeTables{saved: map[string]string{
		"iptables-save": "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:DOCKER-USER - [0:0]\n:SANDBOX-EGRESS - [0:0]\n:SANDBOX-EGRESS-FWD - [0:0]\n" +
			"-A OUTPUT -m owner --uid-owner 1001 -j SANDBOX-EGRESS\n-A OUTPUT -m owner --uid-owner 1002 -j SANDBOX-EGRESS\n" +
			"-A DOCKER-USER -i br-+ -j SANDBOX-EGRESS-FWD\n-A DOCKER-USER -i docker0 -j SANDBOX-EGRESS-FWD\n-A DOCKER-USER -j RETURN\n" +
			"-A SANDBOX-EGRESS -o lo -j RETURN\nCOMMIT\n",
		"ip6tables-save": "*filter\n:OUTPUT ACCEPT [0:0]\n:SANDBOX-EGRESS - [0:0]\n-A OUTPUT -m owner --uid-owner 1001 -j SANDBOX-EGRESS\nCOMMIT\n",
	}}
	if err := fence(context.Background(), f.run, fenceSpec{uids: []int{1001, 1002}, resolvConf: resolvConf(t, "nameserver fd00::53\n"), ipv6: true, forward: true}); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(f.cmds, "\n")
	for _, want := range []string{"iptables :SANDBOX-EGRESS - [0:0]", "iptables :SANDBOX-EGRESS-FWD - [0:0]", "ip6tables :SANDBOX-EGRESS - [0:0]",
		"ip6tables -A SANDBOX-EGRESS -d fd00::53 -p udp --dport 53 -j RETURN", "ip6tables -I OUTPUT 1 -m owner --uid-owner 1002 -j SANDBOX-EGRESS",
		// Forwarded IPv6 is held too: the daemon leaves ip6tables alone, so
		// the jump is from FORWARD.
		"ip6tables :SANDBOX-EGRESS-FWD - [0:0]", "ip6tables -I FORWARD 1 -i br-+ -j SANDBOX-EGRESS-FWD", "ip6tables -I FORWARD 1 -i docker0 -j SANDBOX-EGRESS-FWD"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q among:\n%s", want, all)
		}
	}
	for _, never := range []string{"iptables -I OUTPUT", "iptables -I DOCKER-USER", ":DOCKER-USER", "--uid-owner 1001 -j SANDBOX-EGRESS\nip6tables", "ip6tables -I DOCKER-USER"} {
		if strings.Contains(all, never) {
			t.Errorf("%q: a jump added again, or the daemon's DOCKER-USER emptied:\n%s", never, all)
		}
	}
	if strings.Count(all, "ip6tables -I OUTPUT") != 1 {
		t.Errorf("want only the missing IPv6 jump (uid 1002) added:\n%s", all)
	}
}

func TestFenceFailsClosed(t *testing.T) {
	for name, tc := range map[string]struct {
		fail     func(string) (string, bool)
		ipv6     bool
		contains string
	}{
		"no iptables": {
			fail:     func(string) (string, bool) { return "exec: iptables-save: not found", true },
			contains: "iptables-save -t filter",
		},
		"no owner match": {
			fail: func(cmd string) (string, bool) {
				return "iptables-restore: Couldn't load match `owner'", strings.Contains(cmd, "--uid-owner")
			},
			contains: "owner match",
		},
		"no ip6tables with IPv6": {
			fail:     func(cmd string) (string, bool) { return "ip6tables: not found", strings.HasPrefix(cmd, "ip6tables") },
			ipv6:     true,
			contains: "IPv6",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeTables{fail: tc.fail}
			err := fence(context.Background(), f.run, fenceSpec{uids: []int{1000}, resolvConf: resolvConf(t, ""), ipv6: tc.ipv6})
			if err == nil || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("fence = %v, want an error about %q", err, tc.contains)
			}
			if len(f.cmds) > 0 && !tc.ipv6 {
				t.Errorf("a failed batch left rules behind: %v", f.cmds)
			}
		})
	}
}

// A failing rule is named in the error, not only its line number.
func TestBatchNamesTheFailingRule(t *testing.T) {
	f := &fakeTables{fail: func(cmd string) (string, bool) {
		return "iptables-restore v1.8.9 (nf_tables): Couldn't load match `owner'", strings.Contains(cmd, "--uid-owner 1000")
	}}
	err := fence(context.Background(), f.run, fenceSpec{uids: []int{1000}, resolvConf: resolvConf(t, "")})
	if err == nil || !strings.Contains(err.Error(), `rule "-I OUTPUT 1 -m owner --uid-owner 1000 -j SANDBOX-EGRESS"`) {
		t.Fatalf("fence = %v, want the failing rule named", err)
	}
}

// Without root (task mode) the allowlist cannot be enforced: the start
// fails instead of running unrestricted.
func TestStartEgressNeedsRoot(t *testing.T) {
	s := &egressAllow{log: zerolog.Nop(), order: &dispatch.WorkOrder{}}
	s.order.Config.Network.Allow = []string{"example.com"}
	_, err := s.start(context.Background(), nil, (&fakeTables{}).run, nil)
	if err == nil || !strings.Contains(err.Error(), "not root") {
		t.Fatalf("startEgress without root = %v", err)
	}
	if s.proxy != nil {
		t.Error("a proxy was started although the start failed")
	}
}

// Behind an operator's proxy (HTTPS_PROXY given to the sandbox) the filter
// still decides, and what it allows goes out through that proxy: CONNECT
// with the proxy's credentials, plain HTTP as a proxied request.
func TestProxyChainsToTheUpstreamProxy(t *testing.T) {
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	defer site.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain ok") }))
	defer plain.Close()

	// The upstream: the same proxy allowing loopback, behind a recorder.
	sites := []string{site.Listener.Addr().String(), plain.Listener.Addr().String()}
	everything, _ := newAllowlist(sites, nil, nil)
	inner := newEgressProxy(everything, zerolog.Nop(), nil)
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	defer up.Close()
	// http.ProxyURL: the environment's rules skip loopback destinations,
	// and the test's sites are on loopback.
	upURL, _ := url.Parse(strings.Replace(up.URL, "http://", "http://corp:pw@", 1))
	upstream := func(*url.URL) (*url.URL, error) { return upURL, nil }
	allow, _ := newAllowlist(sites, nil, nil)
	filter := httptest.NewServer(newEgressProxy(allow, zerolog.Nop(), upstream))
	defer filter.Close()
	fu, _ := url.Parse(filter.URL)
	tlsCfg := site.Client().Transport.(*http.Transport).TLSClientConfig
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(fu), TLSClientConfig: tlsCfg}}
	for target, want := range map[string]string{site.URL: "tls ok", plain.URL: "plain ok"} {
		resp, err := c.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("%s through both proxies: %d %q", target, resp.StatusCode, b)
		}
	}
	// Denied hosts never reach the upstream.
	resp, err := c.Get("http://denied.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	auth := "Basic Y29ycDpwdw==" // corp:pw
	want := []string{"CONNECT " + auth, "GET " + auth}
	sort.Strings(seen)
	if resp.StatusCode != http.StatusForbidden || strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("upstream saw %q (denied answered %d), want %q", seen, resp.StatusCode, want)
	}
}

func TestUpstreamFromEnv(t *testing.T) {
	if upstreamFromEnv(func(string) string { return "" }) != nil {
		t.Error("an upstream proxy out of an empty environment")
	}
	env := map[string]string{"https_proxy": "http://corp-proxy:8080", "HTTP_PROXY": "http://corp-plain:8080", "NO_PROXY": "internal.corp"}
	up := upstreamFromEnv(func(k string) string { return env[k] })
	for target, want := range map[string]string{
		"https://registry.npmjs.org": "corp-proxy:8080",
		"http://deb.debian.org":      "corp-plain:8080",
		"https://git.internal.corp":  "", // NO_PROXY: direct
	} {
		u, _ := url.Parse(target)
		got, err := up(u)
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil && want != "") || (got != nil && got.Host != want) {
			t.Errorf("upstream for %s = %v, want %q", target, got, want)
		}
	}
}
