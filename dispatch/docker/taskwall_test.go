package docker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// taskProbeScript is a task run's agent trying its host: a service on
// every address of the host through the bridge gateway,
// host.docker.internal and the host's other address; a listed host port;
// and the rules themselves.
const taskProbeScript = `set -u
probe() { curl -sS -m 20 --noproxy '*' "$2" > "$1.txt" 2>&1; echo " curl=$?" >> "$1.txt"; }
probe gateway "$GW_URL"
probe hostname "$NAME_URL"
probe other "$OTHER_URL"
probe ok "$OK_URL"
{ iptables -F; echo " rc=$?"; } > flush.txt 2>&1
{ iptables-legacy -F; echo " rc=$?"; } > flush-legacy.txt 2>&1
grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status > status.txt
echo 'Probed.'`

// A task sandbox is behind the host wall too: its agent, the sandbox user
// with no capability at all, reaches none of its host's addresses but the
// listed port, and cannot flush the rules its init installed as root.
func TestTaskSandboxIsWalled(t *testing.T) {
	dockertest.ForEachProfile(t, taskSandboxIsWalled)
}

func taskSandboxIsWalled(t *testing.T, iso dispatch.Isolation) {
	gw := dockertest.Gateway(t)
	hostPort, hostHits := serveEverywhere(t, "the host's own service")
	okPort, okHits := serveOnGateway(t, "allowed-ok")
	other := otherHostAddr(t, gw)
	allow, err := dispatch.ParseHostAllow(gw + ":" + okPort)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *docker.Options) {
		o.Isolation, o.HostWall, o.HostAllow = iso, true, allow
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: taskProbeScript, Env: map[string]string{
		"GW_URL":    "http://" + gw + ":" + hostPort + "/",
		"NAME_URL":  "http://" + dispatch.HostGatewayName + ":" + hostPort + "/",
		"OTHER_URL": "http://" + net.JoinHostPort(other, hostPort) + "/",
		"OK_URL":    "http://" + gw + ":" + okPort + "/",
	}}
	spec := f.spec("T-7A5C0A11", dispatch.ModeTask, cfg)
	spec.Order.CloneURL, spec.Order.TargetBranch, spec.Token = "", "", ""
	f.submit(t, ctx, spec)
	st := wait(ctx, f.b, spec.Meta.TaskID).result(t)
	res, err := f.b.Result(ctx, spec.Meta.TaskID)
	if err != nil || res.Status != dispatch.StatusCompleted || st.ExitCode != 0 {
		t.Fatalf("result = %+v, %v; status %+v", res, err, st)
	}
	file := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.b.OutputDir(spec.Meta.TaskID), "artifacts", name))
		if err != nil {
			t.Fatalf("the agent's %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	for _, name := range []string{"gateway.txt", "hostname.txt", "other.txt"} {
		if got := file(name); !strings.HasSuffix(got, "curl=7") {
			t.Errorf("the task agent reaching the host's unlisted service (%s): %q, want refused at once (curl=7)", name, got)
		}
	}
	if got := file("ok.txt"); got != "allowed-ok curl=0" {
		t.Errorf("the task agent reaching the listed host port: %q", got)
	}
	for _, name := range []string{"flush.txt", "flush-legacy.txt"} {
		if got := file(name); strings.HasSuffix(got, " rc=0") {
			t.Errorf("the task agent flushed the rules (%s): %q", name, got)
		}
	}
	status := strings.Join(strings.Fields(file("status.txt")), " ")
	if want := "CapEff: 0000000000000000 CapBnd: 0000000000000000 NoNewPrivs: 1"; status != want {
		t.Errorf("the task agent's capabilities: %q, want %q", status, want)
	}
	if n := hostHits.Load(); n != 0 {
		t.Errorf("the host's unlisted service got %d requests", n)
	}
	if n := okHits.Load(); n != 1 {
		t.Errorf("the listed host port got %d requests, want 1", n)
	}
	if log := sandboxLog(t, spec.Meta.TaskID, spec.Meta.Mode); !strings.Contains(log, `"message":"egress defaults enforced"`) {
		t.Error("the task sandbox's log does not record the egress defaults")
	}
}

// serveEverywhere is a service of the host's on every address.
func serveEverywhere(t *testing.T, body string) (port string, hits *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	hits = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, body)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return port, hits
}

// otherHostAddr is an IPv4 address of the host's besides the sandbox
// network's gateway.
func otherHostAddr(t *testing.T, gw string) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if ok && n.IP.To4() != nil && !n.IP.IsLoopback() && n.IP.String() != gw {
			return n.IP.String()
		}
	}
	t.Fatalf("the host has no IPv4 address besides %s and loopback", gw)
	return ""
}
