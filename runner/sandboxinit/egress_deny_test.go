package sandboxinit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func TestDenyRules(t *testing.T) {
	t.Parallel()
	rc := resolvConf(t, "nameserver 169.254.169.253\nnameserver fd00::53\n")
	nets, err := denyNetsFromEnv(func(k string) string {
		if k == dispatch.EnvDenyNets {
			return "172.17.0.1:8080,10.0.0.0/8,[fd00::1]:4646"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTables{}
	if err := installDeny(context.Background(), f.run, denyFence{deny: nets}, rc, true, chainDocker); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"iptables :SANDBOX-DENY - [0:0]",
		// DNS first: AWS's resolver is link-local.
		"iptables -A SANDBOX-DENY -d 169.254.169.253 -p udp --dport 53 -j RETURN",
		"iptables -A SANDBOX-DENY -d 169.254.169.253 -p tcp --dport 53 -j RETURN",
		"iptables -A SANDBOX-DENY -d 169.254.0.0/16 -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-DENY -d 169.254.0.0/16 -j REJECT",
		"iptables -A SANDBOX-DENY -d 172.17.0.1/32 -p tcp --dport 8080 -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-DENY -d 172.17.0.1/32 -p udp --dport 8080 -j REJECT",
		"iptables -A SANDBOX-DENY -d 10.0.0.0/8 -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-DENY -d 10.0.0.0/8 -j REJECT",
		"iptables -I OUTPUT 1 -j SANDBOX-DENY",
		// Before the inner daemon starts: the init creates DOCKER-USER,
		// which the daemon then keeps.
		"iptables :DOCKER-USER - [0:0]",
		"iptables -I DOCKER-USER 1 -j SANDBOX-DENY",
		"ip6tables :SANDBOX-DENY - [0:0]",
		"ip6tables -A SANDBOX-DENY -d fd00::53 -p udp --dport 53 -j RETURN",
		"ip6tables -A SANDBOX-DENY -d fd00::53 -p tcp --dport 53 -j RETURN",
		"ip6tables -A SANDBOX-DENY -d fe80::/10 -p tcp -j REJECT --reject-with tcp-reset",
		"ip6tables -A SANDBOX-DENY -d fe80::/10 -j REJECT",
		"ip6tables -A SANDBOX-DENY -d fd00:ec2::254/128 -p tcp -j REJECT --reject-with tcp-reset",
		"ip6tables -A SANDBOX-DENY -d fd00:ec2::254/128 -j REJECT",
		"ip6tables -A SANDBOX-DENY -d fd00::1/128 -p tcp --dport 4646 -j REJECT --reject-with tcp-reset",
		"ip6tables -A SANDBOX-DENY -d fd00::1/128 -p udp --dport 4646 -j REJECT",
		"ip6tables -I OUTPUT 1 -j SANDBOX-DENY",
		"ip6tables -I FORWARD 1 -j SANDBOX-DENY",
	}
	if got := strings.Join(f.cmds, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// A sandbox that cannot install the defaults does not start, a task
// sandbox whose init's root half did not fence it neither; a bad list from the backend is a
// start failure naming the variable.
func TestEgressDefaultsFailClosed(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	coding := &dispatch.WorkOrder{Mode: dispatch.ModeExecute}
	task := &dispatch.WorkOrder{Mode: dispatch.ModeTask}
	for name, tc := range map[string]struct {
		order    *dispatch.WorkOrder
		euid     int
		getenv   func(string) string
		fail     bool
		contains string
	}{
		"coding, not root":    {order: coding, euid: 1000, getenv: none, contains: "not root"},
		"coding, no iptables": {order: coding, euid: 0, getenv: none, fail: true, contains: "egress defaults could not be installed"},
		"bad deny list": {order: coding, euid: 0, getenv: func(k string) string {
			return map[string]string{dispatch.EnvDenyNets: "bot.example:8080"}[k]
		}, contains: dispatch.EnvDenyNets},
		// The root half fenced it and said so (taskfence.go).
		"task mode, fenced": {order: task, euid: 1000, getenv: func(k string) string {
			return map[string]string{envTaskFenced: taskFencedOK}[k]
		}},
		// Started without root: nothing fenced it, so it does not run.
		"task mode, not fenced": {order: task, euid: 1000, getenv: none, contains: dispatch.EnvTaskFence},
		// The root half could not: its reason is the run's failure.
		"task mode, fence failed": {order: task, euid: 1000, getenv: func(k string) string {
			return map[string]string{envTaskFenced: "no iptables works here"}[k]
		}, contains: "no iptables works here"},
		"coding": {order: coding, euid: 0, getenv: none},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTables{fail: func(cmd string) (string, bool) {
				return "iptables: not found", tc.fail
			}}
			s := &egressDefaults{log: zerolog.Nop(), order: tc.order}
			err := s.apply(context.Background(), f.run, tc.euid, tc.getenv, resolvConf(t, ""), hostView{})
			if tc.contains == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.euid == 0 && !strings.Contains(strings.Join(f.cmds, "\n"), "iptables -I OUTPUT 1 -j SANDBOX-DENY") {
					t.Errorf("no OUTPUT jump among %v", f.cmds)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("got %v, want an error about %q", err, tc.contains)
			}
		})
	}
}

// countingServer is a loopback server that must not be reached.
func countingServer(t *testing.T) (addr string, port string, hits *atomic.Int64) {
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "reached")
	}))
	t.Cleanup(srv.Close)
	addr = srv.Listener.Addr().String()
	_, port, _ = net.SplitHostPort(addr)
	return addr, port, hits
}

// connectStatus sends a raw CONNECT and returns the status and body.
func connectStatus(t *testing.T, p *proxyFixture, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", p.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "" // a tunnel: no body to wait for
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A name that resolves to a private address (here localhost → 127.0.0.1)
// is refused by the address the proxy dials, unless the address is listed
// too: DNS cannot send an allowed name to the sandbox's neighbours.
func TestProxyRefusesPrivateAddressesOfNames(t *testing.T) {
	t.Parallel()
	addr, port, hits := countingServer(t)
	p := startProxy(t, "localhost:"+port)
	resp, err := p.client(nil).Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "resolves to the private address 127.0.0.1") ||
		!strings.Contains(string(body), "add 127.0.0.1:"+port) {
		t.Errorf("plain HTTP to a name on a private address: %d %q", resp.StatusCode, body)
	}
	if code, text := connectStatus(t, p, "localhost:"+port); code != http.StatusForbidden || !strings.Contains(text, "private address") {
		t.Errorf("CONNECT to a name on a private address: %d %q", code, text)
	}
	if hits.Load() != 0 {
		t.Errorf("the private server was reached %d times", hits.Load())
	}
	// Listing the address opens it.
	p2 := startProxy(t, "localhost:"+port, addr)
	resp, err = p2.client(nil).Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || hits.Load() != 1 {
		t.Errorf("with the address listed: %d, %d hits", resp.StatusCode, hits.Load())
	}
	if !strings.Contains(p.logged(), `"why":"localhost resolves to the private address 127.0.0.1`) {
		t.Errorf("the refusal is not logged with its reason:\n%s", p.logged())
	}
}

// CONNECT goes to 443 only unless the entry names a port.
func TestProxyConnectPorts(t *testing.T) {
	t.Parallel()
	_, port, _ := countingServer(t)
	p := startProxy(t, "127.0.0.1")
	code, text := connectStatus(t, p, "127.0.0.1:"+port)
	if code != http.StatusForbidden || !strings.Contains(text, "port "+port+" is not allowed by 127.0.0.1") {
		t.Errorf("CONNECT to an unlisted port: %d %q", code, text)
	}
	p2 := startProxy(t, "127.0.0.1:"+port)
	if code, text := connectStatus(t, p2, "127.0.0.1:"+port); code != http.StatusOK {
		t.Errorf("CONNECT to a listed port: %d %q", code, text)
	}
}

// The deny list wins over network.allow, even for a listed address.
func TestProxyRefusesDeniedNetworks(t *testing.T) {
	t.Parallel()
	addr, port, hits := countingServer(t)
	deny, err := dispatch.ParseDenyNets("127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyDenying(t, deny, addr, "localhost:"+port)
	for _, target := range []string{"http://" + addr + "/", "http://localhost:" + port + "/"} {
		resp, err := p.client(nil).Get(target)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "denied network 127.0.0.1/32:"+port) {
			t.Errorf("%s: %d %q", target, resp.StatusCode, body)
		}
	}
	if code, _ := connectStatus(t, p, addr); code != http.StatusForbidden {
		t.Errorf("CONNECT to a denied address: %d", code)
	}
	if hits.Load() != 0 {
		t.Errorf("a denied server was reached %d times", hits.Load())
	}
}

func TestRequestPort(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint16{"http://x": sandboxcfg.DefaultHTTPPort, "http://x:8080/p": 8080} {
		u, _ := url.Parse(in)
		if got, err := requestPort(u); err != nil || got != want {
			t.Errorf("requestPort(%s) = %d, %v", in, got, err)
		}
	}
}

func TestParseTaskDrop(t *testing.T) {
	t.Parallel()
	if d, err := parseTaskDrop("1000:1001"); err != nil || d != (taskDrop{uid: 1000, gid: 1001}) {
		t.Errorf("1000:1001 = %+v, %v", d, err)
	}
	for _, bad := range []string{"1", "0:0", "1000:0", "sandbox:sandbox", "1000:"} {
		if _, err := parseTaskDrop(bad); err == nil || !strings.Contains(err.Error(), dispatch.EnvTaskFence) {
			t.Errorf("%q: %v, want an error naming %s", bad, err, dispatch.EnvTaskFence)
		}
	}
}
