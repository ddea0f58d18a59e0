package sandboxinit

// What the filtering proxy lets through: network.allow's entries by name
// and port before it dials, and the address it actually dials afterwards
// (denied networks, private addresses), so that DNS cannot send an allowed
// name somewhere the list does not allow.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// allowRule is one parsed entry and where it comes from.
type allowRule struct {
	entry  sandboxcfg.AllowEntry
	source string
	// trusted entries come from the bot, not the repository (the clone
	// URL's host): their names may resolve to private addresses, as a
	// self-hosted git server's do.
	trusted bool
}

// allowlist decides which destinations the proxy lets the sandbox reach.
type allowlist struct {
	rules []allowRule
	deny  []dispatch.DenyNet
	// exempt are the host ports excepted from deny (the init's chain's
	// first RETURNs).
	exempt  []dispatch.DenyNet
	entries []string // for messages, in the order given
	// start is set while the sandbox starts (openForStart): only the
	// init and the inner daemon run, and everything not denied passes.
	start atomic.Bool
}

// openForStart lets everything but the denied networks through until
// closeStart: the init's pulls of service images go through the proxy
// too, before anything of the agent's runs.
func (a *allowlist) openForStart() { a.start.Store(true) }

// closeStart ends the start's allowance; from then on only the list holds.
func (a *allowlist) closeStart() { a.start.Store(false) }

// newAllowlist parses network.allow entries plus the rules the sandbox
// cannot work without (alwaysAllowed); deny are the networks no entry can
// open.
func newAllowlist(entries []string, always []allowRule, deny []dispatch.DenyNet) (*allowlist, error) {
	a := &allowlist{deny: deny}
	for i, s := range entries {
		e, err := sandboxcfg.ParseAllowEntry(s)
		if err != nil {
			return nil, fmt.Errorf("network.allow[%d] %q: %v", i, s, err)
		}
		a.rules = append(a.rules, allowRule{entry: e, source: "network.allow"})
		a.entries = append(a.entries, e.String())
	}
	a.rules = append(a.rules, always...)
	return a, nil
}

// grant is the proxy's permission for one request: which destination was
// asked for and on what grounds.
type grant struct {
	host    string // normalized, as asked for
	port    uint16
	connect bool
	why     string
	trusted bool
}

// allows decides by name and port, before anything is resolved.
func (a *allowlist) allows(host string, port uint16, connect bool) (grant, bool) {
	h := normalizeHost(host)
	g := grant{host: h, port: port, connect: connect}
	if h == "" {
		g.why = "no host in the request"
		return g, false
	}
	if a.start.Load() {
		// Private addresses too, as the inner daemon reached them before
		// it was proxied; the deny list still applies at the dial.
		g.why, g.trusted = "the sandbox's start (services, before the runner)", true
		return g, true
	}
	var portless []string
	for _, r := range a.rules {
		if !r.entry.MatchesName(h) {
			continue
		}
		if !r.entry.AllowsPort(port, connect) {
			portless = append(portless, r.entry.String())
			continue
		}
		g.why = r.source + " " + r.entry.String()
		g.trusted = r.trusted
		return g, true
	}
	if len(portless) > 0 {
		g.why = fmt.Sprintf("port %d is not allowed by %s (an entry without a port allows 443 for HTTPS and 80 for plain HTTP; list %s:%d for this one)",
			port, strings.Join(portless, ", "), h, port)
		return g, false
	}
	g.why = "not in network.allow of .sandbox.yml"
	return g, false
}

// refusal is a dial the address check stopped; the proxy answers 403.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// checkAddr vets the address a granted request is about to connect to.
func (a *allowlist) checkAddr(g grant, addr netip.Addr, port uint16) error {
	addr = addr.Unmap()
	if d, ok := a.denied(addr, port); ok {
		return &refusal{fmt.Sprintf("%s resolves to %s, which no sandbox may reach (denied network %s)", g.host, netip.AddrPortFrom(addr, port), d)}
	}
	if !dispatch.PrivateAddr(addr) || g.trusted {
		return nil
	}
	for _, r := range a.rules {
		if r.entry.IsAddr() && r.entry.Prefix.Contains(addr) && r.entry.AllowsPort(port, g.connect) {
			return nil
		}
	}
	return &refusal{fmt.Sprintf("%s resolves to the private address %s, which network.allow does not list (add %s to reach it)",
		g.host, addr, sandboxcfg.AllowEntry{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Port: port})}
}

// checkDeny vets a connection to a hop the operator configured (the
// upstream proxy): only the deny list applies.
func (a *allowlist) checkDeny(addr netip.Addr, port uint16) error {
	if d, ok := a.denied(addr.Unmap(), port); ok {
		return &refusal{fmt.Sprintf("%s is a denied network (%s)", netip.AddrPortFrom(addr, port), d)}
	}
	return nil
}

// denied is the deny entry that holds addr:port, unless a host port the
// wall excepts (dispatch.EnvAllowHosts) is it: as in the init's chain,
// the exceptions come first.
func (a *allowlist) denied(addr netip.Addr, port uint16) (dispatch.DenyNet, bool) {
	for _, e := range a.exempt {
		if e.Contains(addr, port) {
			return dispatch.DenyNet{}, false
		}
	}
	for _, d := range a.deny {
		if d.Contains(addr, port) {
			return d, true
		}
	}
	return dispatch.DenyNet{}, false
}

// dialer connects for g, checking the address in the socket's Control
// hook: after resolution, before the SYN, for every address tried.
func (p *egressProxy) dialer(check func(netip.Addr, uint16) error) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := *p.baseDialer
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("egress check: %w", err)
		}
		return check(ap.Addr(), ap.Port())
	}
	return d.DialContext
}

// dialGranted dials addr (host:port) for g: the destination itself gets the
// full check, any other address (the operator's upstream proxy) only the
// deny list.
func (p *egressProxy) dialGranted(ctx context.Context, g grant, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if normalizeHost(host) == g.host && port == strconv.Itoa(int(g.port)) {
		return p.dialer(func(a netip.Addr, pt uint16) error { return p.allow.checkAddr(g, a, pt) })(ctx, network, addr)
	}
	return p.dialer(p.allow.checkDeny)(ctx, network, addr)
}

type grantKey struct{}

// dialFromContext is the forwarding transport's dialer: the request's
// grant rides in its context. A request without one is refused.
func (p *egressProxy) dialFromContext(ctx context.Context, network, addr string) (net.Conn, error) {
	g, ok := ctx.Value(grantKey{}).(grant)
	if !ok {
		return nil, &refusal{"egress proxy: a connection without a checked request"}
	}
	return p.dialGranted(ctx, g, network, addr)
}

func asRefusal(err error) (*refusal, bool) {
	var r *refusal
	return r, errors.As(err, &r)
}

// requestPort is the port of an absolute URL, by scheme when none is given.
func requestPort(u *url.URL) (uint16, error) {
	p := u.Port()
	if p == "" {
		return sandboxcfg.DefaultHTTPPort, nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q", p)
	}
	return uint16(n), nil
}

// alwaysAllowed lists the destinations a run needs whatever the repository
// asks: its git remote, at the clone URL's port. The model provider is the
// operator's to list (or the model gateway's to reach, outside the proxy).
func alwaysAllowed(o *dispatch.WorkOrder) []allowRule {
	if o == nil || o.CloneURL == "" {
		return nil
	}
	var host string
	var port uint16
	if u, err := url.Parse(o.CloneURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
		if n, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
			port = uint16(n)
		}
	} else if i := strings.Index(o.CloneURL, "@"); i >= 0 {
		// scp-like git@host:owner/repo
		if h, _, ok := strings.Cut(o.CloneURL[i+1:], ":"); ok {
			host, port = h, 22
		}
	}
	e, err := sandboxcfg.ParseAllowEntry(host)
	if host == "" || err != nil {
		return nil
	}
	e.Port = port
	return []allowRule{{entry: e, source: "the clone URL's host", trusted: true}}
}
