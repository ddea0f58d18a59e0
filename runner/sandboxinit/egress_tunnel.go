package sandboxinit

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// The proxy's way out: CONNECT tunnels, directly or through the operator's
// own proxy, and the bytes copied both ways.

// dialTunnel connects to addr (host:port), through the upstream proxy's
// own CONNECT when there is one for it.
func (p *egressProxy) dialTunnel(ctx context.Context, g grant, addr string) (net.Conn, error) {
	var via *url.URL
	if p.upstream != nil {
		u, err := p.upstream(&url.URL{Scheme: "https", Host: addr})
		if err != nil {
			return nil, fmt.Errorf("upstream proxy for %s: %w", addr, err)
		}
		via = u
	}
	if via == nil {
		return p.dialGranted(ctx, g, "tcp", addr)
	}
	if via.Scheme != "http" {
		return nil, fmt.Errorf("upstream proxy %s: only http:// proxies are supported, got %s://", via.Host, via.Scheme)
	}
	proxyAddr := via.Host
	if via.Port() == "" {
		proxyAddr = net.JoinHostPort(via.Hostname(), "80")
	}
	c, err := p.dialGranted(ctx, g, "tcp", proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("upstream proxy %s: %w", via.Host, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	if via.User != nil {
		pw, _ := via.User.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(via.User.Username()+":"+pw)) + "\r\n"
	}
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, fmt.Errorf("upstream proxy %s: %w", via.Host, err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("upstream proxy %s: %w", via.Host, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("upstream proxy %s answered CONNECT %s with %s", via.Host, addr, resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	return &bufferedConn{Conn: c, r: br}, nil
}

// bufferedConn is a connection whose first bytes a bufio.Reader already
// took (the upstream proxy's answer may come with the server's first
// bytes behind it).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// upstreamFromEnv is the operator's proxy from the sandbox's environment
// (the init's own, before the runner's variables point at the filter), or
// nil when none is set.
func upstreamFromEnv(getenv func(string) string) func(*url.URL) (*url.URL, error) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	cfg := httpproxy.Config{
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil
	}
	return cfg.ProxyFunc()
}

// tunnel copies both ways until both sides are done, passing half-closes
// on so that protocols that end with a shutdown(SHUT_WR) still work.
func tunnel(a, b net.Conn) {
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
