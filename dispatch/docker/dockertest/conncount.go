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
	l, err := net.Listen("tcp", net.JoinHostPort(Gateway(t), "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	conns = &atomic.Int64{}
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
	return l.Addr().String(), conns
}
