package dockertest

import (
	"net"
	"sync/atomic"
	"testing"
)

// ConnCounter listens on a port of the bridge gateway, where a sandbox and
// its daemon reach the host, and counts every connection made to it,
// whatever is said on it (a pull, a push, a fetch, a CONNECT): a test that
// a sandbox must not reach the host asserts the count stays 0. It returns
// the listener's host:port.
func ConnCounter(t testing.TB) (hostPort string, conns *atomic.Int64) {
	t.Helper()
	addr, conns := CountConns(t, net.JoinHostPort(Gateway(t), "0"))
	return addr.String(), conns
}

// CountConns listens on addr (":0" is every address of the host, as an
// operator's service bound to all addresses) and counts every connection
// made to it until the test ends.
func CountConns(t testing.TB, addr string) (net.Addr, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	conns := &atomic.Int64{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return l.Addr(), conns
}
