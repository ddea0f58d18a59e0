package sandboxinit

// The egress proxy: the one way out of a sandbox with network.allow, an
// HTTP forward proxy in the init that lets through only allowed hosts.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
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
