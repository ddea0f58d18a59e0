package app

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// A client that sends headers and then trickles (or stalls) its body loses
// its connection after the read timeout instead of holding it for ever.
func TestHTTPServerReadTimeoutCutsStalledBodies(t *testing.T) {
	t.Parallel()
	cfg := &Config{}
	cfg.Ops.defaults(&cfg.Settings)
	cfg.Ops.HTTPReadTimeout = 300 * time.Millisecond
	srv := NewHTTPServer(cfg, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 1024)
		for {
			if _, err := r.Body.Read(buf); err != nil {
				http.Error(w, err.Error(), http.StatusRequestTimeout)
				return
			}
		}
	}))
	if srv.ReadHeaderTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 {
		t.Fatalf("timeouts not all set: %+v", srv)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /api/github/hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
	// The test's own deadline only bounds a broken server.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	_, err = bufio.NewReader(conn).ReadString(0)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept a stalled body's connection open for %s", time.Since(start))
	}
	t.Logf("connection ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestOpsConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SANDBOX_ADMIN_LISTEN": "0.0.0.0:9999", "SANDBOX_MAX_BODY_READERS": "5", "SANDBOX_DISPATCH_DEADLINE": "2s"}
	var o OpsConfig
	var runs handlers.Settings
	if err := o.applyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &runs); err != nil {
		t.Fatal(err)
	}
	o.defaults(&runs)
	if o.AdminListen != "0.0.0.0:9999" || o.MaxBodyReaders != 5 || runs.DispatchDeadline != 2*time.Second || o.HTTPReadTimeout != DefaultHTTPReadTimeout {
		t.Errorf("ops = %+v, handlers' = %+v", o, runs)
	}
	var d OpsConfig
	d.defaults(&handlers.Settings{})
	if d.AdminListen != "127.0.0.1:9090" {
		t.Errorf("admin listener defaults to %q, want loopback", d.AdminListen)
	}
	for k, v := range map[string]string{"SANDBOX_MAX_BODY_READERS": "0", "SANDBOX_DISPATCH_DEADLINE": "soon"} {
		err := (&OpsConfig{}).applyEnv(func(key string) (string, bool) { return v, key == k }, &handlers.Settings{})
		if err == nil || err.Error()[:len(k)] != k {
			t.Errorf("%s=%s: error %v does not name the setting", k, v, err)
		}
	}
}
