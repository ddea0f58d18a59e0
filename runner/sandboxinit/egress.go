package sandboxinit

// The egress allowlist (network.allow in .sandbox.yml). When it is set the
// init runs a filtering forward proxy on loopback, points the runner and
// the agent at it with the usual proxy variables, and fences the sandbox
// user in with iptables so that a program ignoring those variables cannot
// get out either. The proxy itself runs in the init, as root, which the
// fence does not cover: it is the only way out for the sandbox user.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// ProxyAddr is where the filtering proxy listens inside the sandbox.
const ProxyAddr = "127.0.0.1:3128"

// Chains the init owns. A restarted container gets a fresh network
// namespace, but the rules are written to be re-applied anyway.
const (
	chainEgress  = "SANDBOX-EGRESS"
	chainForward = "SANDBOX-EGRESS-FWD"
	chainDocker  = "DOCKER-USER"
)

// normalizeHost lowercases, drops a port, IPv6 brackets and the root dot.
func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	return strings.TrimSuffix(h, ".")
}

// egressProxy is an HTTP forward proxy: CONNECT tunnels for HTTPS and
// absolute-URL requests for plain HTTP, both only to allowed hosts.
type egressProxy struct {
	allow *allowlist
	log   zerolog.Logger
	// baseDialer is copied for every dial, with the address check added.
	baseDialer *net.Dialer
	// upstream is the operator's proxy for a destination (nil: direct).
	upstream  func(*url.URL) (*url.URL, error)
	transport http.RoundTripper
	forward   *httputil.ReverseProxy
}

// newEgressProxy filters for allow; upstream, when not nil, says which
// proxy of the operator's (HTTPS_PROXY given to the sandbox) a request
// must go through, so an allowlist works behind a corporate proxy too.
func newEgressProxy(allow *allowlist, log zerolog.Logger, upstream func(*url.URL) (*url.URL, error)) *egressProxy {
	p := &egressProxy{
		allow:      allow,
		log:        log,
		baseDialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		upstream:   upstream,
	}
	p.transport = &http.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) {
			if upstream == nil {
				return nil, nil
			}
			return upstream(r.URL)
		},
		DialContext:           p.dialFromContext,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
	}
	p.forward = &httputil.ReverseProxy{
		// Rewrite (rather than Director) adds no X-Forwarded-* headers:
		// the destination has no business knowing the sandbox's layout.
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.Host = r.In.Host },
		Transport:     p.transport,
		FlushInterval: -1, // git's smart HTTP streams
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if ref, ok := asRefusal(err); ok {
				p.deny(w, r.Method, r.URL.Hostname(), ref.msg)
				return
			}
			p.log.Warn().Err(err).Str("host", r.URL.Hostname()).Msg("egress proxy: upstream request failed")
			http.Error(w, fmt.Sprintf("sandbox egress proxy: %s: %v", r.URL.Host, err), http.StatusBadGateway)
		},
	}
	return p
}

func (p *egressProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "sandbox egress proxy: this is a forward proxy; send absolute URLs (http://host/path) or CONNECT host:port", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, fmt.Sprintf("sandbox egress proxy: scheme %q is not proxied; use CONNECT for https", r.URL.Scheme), http.StatusBadRequest)
		return
	}
	port, err := requestPort(r.URL)
	if err != nil {
		http.Error(w, fmt.Sprintf("sandbox egress proxy: bad %v in %s", err, r.URL.Host), http.StatusBadRequest)
		return
	}
	g, ok := p.check(w, r.Method, r.URL.Hostname(), port, false)
	if !ok {
		return
	}
	p.forward.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, g)))
}

// check answers 403 and logs when host:port is not allowed. Only the host
// is logged, never the URL: query strings carry tokens.
func (p *egressProxy) check(w http.ResponseWriter, method, host string, port uint16, connect bool) (grant, bool) {
	g, ok := p.allow.allows(host, port, connect)
	if !ok {
		p.deny(w, method, host, g.why)
		return g, false
	}
	p.log.Debug().Str("host", host).Uint16("port", port).Str("method", method).Str("why", g.why).Msg("egress allowed")
	return g, true
}

func (p *egressProxy) deny(w http.ResponseWriter, method, host, why string) {
	p.log.Warn().Str("host", host).Str("method", method).Str("why", why).Msg("egress denied")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "sandbox egress proxy: %s is not allowed (%s); allowed: %s\n", host, why, p.describe())
}

func (p *egressProxy) describe() string {
	var hs []string
	hs = append(hs, p.allow.entries...)
	for _, r := range p.allow.rules {
		if r.source != "network.allow" {
			hs = append(hs, r.entry.String())
		}
	}
	sort.Strings(hs)
	return strings.Join(hs, ", ")
}

func (p *egressProxy) connect(w http.ResponseWriter, r *http.Request) {
	host, portText, err := net.SplitHostPort(r.Host)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil || port == 0 {
		http.Error(w, fmt.Sprintf("sandbox egress proxy: CONNECT needs host:port, got %q", r.Host), http.StatusBadRequest)
		return
	}
	g, ok := p.check(w, r.Method, host, uint16(port), true)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	upstream, err := p.dialTunnel(ctx, g, r.Host)
	cancel()
	if ref, ok := asRefusal(err); ok {
		p.deny(w, r.Method, host, ref.msg)
		return
	}
	if err != nil {
		p.log.Warn().Err(err).Str("host", host).Msg("egress proxy: cannot reach an allowed host")
		http.Error(w, fmt.Sprintf("sandbox egress proxy: cannot reach %s: %v", r.Host, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		http.Error(w, "sandbox egress proxy: connection cannot be taken over", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		p.log.Warn().Err(err).Msg("egress proxy: hijack")
		return
	}
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	// A client may send its TLS hello right behind the CONNECT line; what
	// the server's reader already took must go first.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := upstream.Write(b); err != nil {
			client.Close()
			upstream.Close()
			return
		}
	}
	tunnel(client, upstream)
}

// proxyEnv is what the runner and the agent get: the proxy in both the
// upper- and lower-case spellings (curl reads only http_proxy, Go and Node
// tools the upper case), and NO_PROXY for loopback and the services, which
// are reached directly.
func proxyEnv(addr string, svcs dispatch.Services) map[string]string {
	u := "http://" + addr
	noProxy := []string{"localhost", "127.0.0.1", "::1"}
	for _, name := range sortedNames(svcs) {
		noProxy = append(noProxy, name)
		if h, _, err := net.SplitHostPort(svcs[name]); err == nil {
			noProxy = append(noProxy, h)
		}
	}
	np := strings.Join(dedupe(noProxy), ",")
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": np, "no_proxy": np,
	}
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// fenceRules are the rules that keep uid's connections on loopback (the
// proxy and local dev servers), the inner Docker networks (services) and
// the resolvers of resolv.conf. Everything else it opens is rejected at
// once (a TCP reset, not a silent drop), so a tool fails fast with
// "connection refused" instead of hanging.
func fenceRules(nameservers []string) [][]string {
	rules := [][]string{
		{"-A", chainEgress, "-o", "lo", "-j", "RETURN"},
		// The inner daemon's default bridge and its user-defined networks
		// (the sandbox network, and any the agent creates later).
		{"-A", chainEgress, "-o", "docker0", "-j", "RETURN"},
		{"-A", chainEgress, "-o", "br-+", "-j", "RETURN"},
	}
	for _, ns := range nameservers {
		rules = append(rules,
			[]string{"-A", chainEgress, "-d", ns, "-p", "udp", "--dport", "53", "-j", "RETURN"},
			[]string{"-A", chainEgress, "-d", ns, "-p", "tcp", "--dport", "53", "-j", "RETURN"})
	}
	return append(rules,
		[]string{"-A", chainEgress, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
		[]string{"-A", chainEgress, "-j", "REJECT"},
	)
}

// jumpRule sends the sandbox user's packets through the fence.
func jumpRule(uid int) []string {
	return []string{"OUTPUT", "-m", "owner", "--uid-owner", strconv.Itoa(uid), "-j", chainEgress}
}

// forwardRules keep the inner containers (which the sandbox user starts
// through the inner daemon, as root, in their own namespaces) from going
// around the fence: they may talk to each other and answer, not go out.
func forwardRules() [][]string {
	return [][]string{
		{"-A", chainForward, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"},
		{"-A", chainForward, "-o", "docker0", "-j", "RETURN"},
		{"-A", chainForward, "-o", "br-+", "-j", "RETURN"},
		{"-A", chainForward, "-j", "REJECT"},
	}
}

// fence installs the rules for uids with iptables and, when the sandbox
// has IPv6 beyond loopback, ip6tables, one batch per family. withForward
// adds the inner-container rules (only when an inner daemon runs:
// DOCKER-USER is its chain).
func fence(ctx context.Context, run ipTables, uids []int, resolvConf string, hasIPv6, withForward bool) error {
	v4, v6 := nameservers(resolvConf)
	if err := fenceFamily(ctx, run, familyV4, uids, v4, withForward); err != nil {
		return err
	}
	if hasIPv6 {
		if err := fenceFamily(ctx, run, familyV6, uids, v6, false); err != nil {
			return fmt.Errorf("the sandbox has IPv6 addresses, so it needs the IPv6 fence too: %w", err)
		}
	}
	return nil
}

func fenceFamily(ctx context.Context, run ipTables, fam family, uids []int, ns []string, withForward bool) error {
	b, err := newBatch(ctx, run, fam)
	if err != nil {
		return err
	}
	b.chain(chainEgress)
	for _, r := range fenceRules(ns) {
		b.rule(r...)
	}
	for _, uid := range uids {
		b.jump(jumpRule(uid))
	}
	if withForward {
		b.chain(chainForward)
		for _, r := range forwardRules() {
			b.rule(r...)
		}
		b.ensureChain(chainDocker)
		for _, in := range []string{"br-+", "docker0"} {
			b.jump([]string{chainDocker, "-i", in, "-j", chainForward})
		}
	}
	if err := b.commit(ctx, run); err != nil {
		if len(uids) > 0 {
			return fmt.Errorf("%w (the owner match, xt_owner / nft meta skuid, must be available: without it the sandbox user cannot be told apart)", err)
		}
		return err
	}
	return nil
}

// nameservers reads the resolvers from a resolv.conf, by address family.
func nameservers(path string) (v4, v6 []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip := net.ParseIP(strings.SplitN(f[1], "%", 2)[0])
		switch {
		case ip == nil:
		case ip.To4() != nil:
			v4 = append(v4, ip.String())
		default:
			v6 = append(v6, ip.String())
		}
	}
	return v4, v6
}

// hasIPv6 reports whether any interface has an IPv6 address other than
// loopback: only then is there an IPv6 way out to fence.
func hasIPv6() bool {
	ifs, err := net.Interfaces()
	if err != nil {
		return true // fail closed: fence it (and fail if we cannot)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.To16() != nil {
				return true
			}
		}
	}
	return false
}

// egress is the running allowlist: the proxy's server.
type egress struct {
	srv  *http.Server
	done chan struct{}
}

func (e *egress) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	<-e.done
}

// startEgress enforces network.allow for acct: proxy first (so that the
// fence never cuts the runner off from a way out that does not exist yet),
// then the fence. It returns the variables the runner gets.
func (s *sandbox) startEgress(ctx context.Context, acct *account, run ipTables) (map[string]string, error) {
	cfg := s.order.Config.Network
	if acct == nil || os.Geteuid() != 0 {
		return nil, errors.New("network.allow is set, but the sandbox init is not root, so it cannot fence the sandbox user in " +
			"(task mode runs unprivileged: drop network.allow there, or run a coding sandbox)")
	}
	allow, err := newAllowlist(cfg.Allow, alwaysAllowed(s.order), s.deny.nets)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", ProxyAddr)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: listen on %s: %w", ProxyAddr, err)
	}
	// The init's logger already names its component; the messages say
	// "egress" so that a grep for it finds every decision.
	log := s.log
	upstream := upstreamFromEnv(os.Getenv)
	if upstream != nil {
		// Never the URL itself: it may carry the proxy's credentials.
		log.Info().Msg("egress proxy connects through the sandbox's upstream proxy (HTTP(S)_PROXY)")
	}
	e := &egress{
		srv: &http.Server{
			Handler:           newEgressProxy(allow, log, upstream),
			ReadHeaderTimeout: 30 * time.Second,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("egress proxy stopped")
		}
	}()
	s.egress = e
	if err := fence(ctx, run, fenceUIDs(*acct), "/etc/resolv.conf", hasIPv6(), s.inner); err != nil {
		return nil, fmt.Errorf("network.allow is set but the egress fence could not be installed, so the sandbox would run unrestricted: %w", err)
	}
	log.Info().Strs("allow", cfg.Allow).Str("proxy", ProxyAddr).Ints("uids", fenceUIDs(*acct)).Msg("egress allowlist enforced")
	return proxyEnv(ProxyAddr, s.services), nil
}

// agentUser is the account the agent runs as. The runner may get an
// account of its own; the allowlist fences both, since whatever the agent
// starts runs as one of them.
const agentUser = "sandbox"

// fenceUIDs are the uids network.allow holds: the account the runner was
// started as and the agent's.
func fenceUIDs(runner account) []int {
	uids := []int{runner.UID}
	if a, err := lookupAccount(agentUser); err == nil && a.UID != runner.UID {
		uids = append(uids, a.UID)
	}
	return uids
}
