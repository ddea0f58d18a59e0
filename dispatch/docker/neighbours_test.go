package docker_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// neighbourPort is where the listening sandbox's agent listens, on every
// address of the sandbox (as a dev server bound to 0.0.0.0 does).
const neighbourPort = "7311"

// listenerAgent listens as the agent on 0.0.0.0 and reports each
// connection it accepts as a tool call; meanwhile it records the DNS it and
// an inner container were given and probes the bot's port on its own
// network's gateway (written by the test to out/gw), then waits for go.
const listenerAgent = `set -u
cat /etc/resolv.conf > resolv.txt
python3 -u -c '
import json, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", ` + neighbourPort + `))
s.listen(16)
print(json.dumps({"type": "tool_use", "tool": "peer-listening"}), flush=True)
while True:
    c, addr = s.accept()
    c.settimeout(5)
    try:
        c.recv(4096)  # the request, so the answer is not reset unread
    except OSError:
        pass
    print(json.dumps({"type": "tool_use", "tool": "peer-accepted", "input": {"from": addr[0]}}), flush=True)
    c.sendall(b"HTTP/1.0 200 OK\r\n\r\nsecret-of-the-listener")
    c.close()
' &
listener=$!
docker load --quiet --input "$PROBE_TAR" > load.txt 2>&1
docker run --rm "$PROBE_IMAGE" file:///etc/resolv.conf > inner-resolv.txt 2>&1
while [ ! -e /sandbox/out/gw ]; do sleep 0.1; done
curl -sS -m 20 --noproxy '*' "http://$(cat /sandbox/out/gw):$BOT_PORT/" > bot-on-gateway.txt 2>&1; echo " curl=$?" >> bot-on-gateway.txt
echo '{"type":"tool_use","tool":"probed"}'
while [ ! -e /sandbox/out/go ]; do sleep 0.1; done
kill $listener
echo 'Listened.'`

// peerProber connects to the listening sandbox as the agent and reports
// curl's exit code as a tool call: 0 is a connection that got through (so
// is 52 or 56, a connection the listener answered badly; the listener's
// count of accepted connections is the test's witness). It writes what it
// got, so a coding run has a change to push.
const peerProber = `curl -sS --noproxy '*' --connect-timeout 5 -m 10 "$PEER_URL" > peer.txt 2>&1
code=$?
echo "{\"type\":\"tool_use\",\"tool\":\"peer-curl-$code\"}"
echo 'Probed.'`

// A sandbox cannot reach another sandbox. One sandbox's agent listens on
// 0.0.0.0 (a dev server, a service published there); the agent of a
// second coding sandbox and of a task sandbox (which has no fence of its
// own inside) each try to connect to it and get nothing, while the host
// reaches it (the listener is up and reports what it accepts). The
// listening sandbox still has what a sandbox needs on its network: the
// git remote on host.docker.internal (clone and push), the resolvers a
// container on the engine's default bridge gets (not Docker's embedded
// one, which would name the neighbours), in its inner containers too; and
// the bot's port stays fenced on its own network's gateway.
func TestSandboxesCannotReachEachOther(t *testing.T) {
	probe := dockertest.ProbeImage(t)
	// The bot's stand-in listens on the default bridge's gateway now and
	// on the sandbox network's gateway once the backend has made it; the
	// backend fences its port on every address of the host.
	botPort, botHits := serveOnGateway(t, "the bot itself")
	f := newFixture(t, func(o *docker.Options) { o.BotListen = []string{":" + botPort} })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := f.b.CacheImage(ctx, probe); err != nil {
		t.Fatal(err)
	}

	listener := f.spec("T-9EE20A01", dispatch.ModeExecute, sandboxcfg.Config{Harness: "command", Command: listenerAgent, Env: map[string]string{
		"BOT_PORT": botPort, "PROBE_IMAGE": probe, "PROBE_TAR": dispatch.CachedImageFile("/cache/images-seed", probe),
	}})
	f.submit(t, ctx, listener)
	wl := wait(ctx, f.b, listener.Meta.TaskID)
	wl.until(t, ctx, "the listener", toolIs("peer-listening"))
	addr, gw := containerAddr(t, "sandbox-"+listener.Meta.TaskID+"-execute")
	peerURL := "http://" + net.JoinHostPort(addr, neighbourPort) + "/"

	// The host reaches the listener: what the probes below do not get is
	// there to be had.
	if body := hostGet(t, ctx, peerURL); body != "secret-of-the-listener" {
		t.Fatalf("the host reaching the listening sandbox at %s got %q", peerURL, body)
	}
	wl.until(t, ctx, "the host's connection reported", toolIs("peer-accepted"))

	probers := []dispatch.RunSpec{
		f.spec("T-9EE20B01", dispatch.ModeExecute, sandboxcfg.Config{Harness: "command", Command: peerProber, Env: map[string]string{"PEER_URL": peerURL}}),
		taskSpec("T-9EE20C01", sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: peerProber, Env: map[string]string{"PEER_URL": peerURL}}),
	}
	for _, p := range probers {
		f.submit(t, ctx, p)
		w := wait(ctx, f.b, p.Meta.TaskID)
		var code string
		w.until(t, ctx, p.Meta.TaskID+"'s probe", func(pr dispatch.Progress) bool {
			c, ok := strings.CutPrefix(pr.Tool, "peer-curl-")
			code = c
			return ok
		})
		if code != "7" && code != "28" { // refused, or timed out on a dropped SYN
			t.Errorf("a %s sandbox's agent connected to another sandbox's listener at %s", p.Meta.Mode, peerURL)
		}
		t.Logf("%s sandbox → the listening sandbox: curl exit %s", p.Meta.Mode, code)
		if st := w.result(t); st.ExitCode != 0 {
			t.Errorf("%s run = %+v", p.Meta.TaskID, st)
		}
	}

	// The bot's port on the listener's own network's gateway (the default
	// bridge's is served already).
	if gw != dockertest.Gateway(t) {
		gwListener, err := net.Listen("tcp", net.JoinHostPort(gw, botPort))
		if err != nil {
			t.Fatalf("listen on the sandbox network's gateway %s: %v", gw, err)
		}
		gwSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			botHits.Add(1)
			io.WriteString(w, "the bot itself")
		})}
		go gwSrv.Serve(gwListener)
		t.Cleanup(func() { gwSrv.Close() })
	}
	out := f.b.OutputDir(listener.Meta.TaskID)
	if err := os.WriteFile(filepath.Join(out, "gw"), []byte(gw), 0o644); err != nil {
		t.Fatal(err)
	}
	wl.until(t, ctx, "the listener's own probes", toolIs("probed"))
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st := wl.result(t); st.ExitCode != 0 {
		t.Fatalf("listener run = %+v", st)
	}
	accepted := 0
	for _, p := range wl.lines {
		if p.Tool == "peer-accepted" {
			accepted++
		}
	}
	if accepted != 1 {
		t.Errorf("the listening sandbox accepted %d connections, want 1 (the host's)", accepted)
	}

	file := func(name string) string {
		t.Helper()
		got, ok := f.remote.File(t, listener.Order.TargetBranch, name)
		if !ok {
			t.Fatalf("%s not pushed", name)
		}
		return got
	}
	if got := strings.TrimSpace(file("bot-on-gateway.txt")); !strings.HasSuffix(got, "curl=7") {
		t.Errorf("the agent reaching the bot's port on its network's gateway %s: %q, want refused at once (curl=7)", gw, got)
	}
	if n := botHits.Load(); n != 0 {
		t.Errorf("the bot's stand-in got %d requests", n)
	}
	want := nameservers(defaultBridgeResolvConf(t))
	if got := nameservers(file("resolv.txt")); got != want {
		t.Errorf("the sandbox's resolvers are %q, want those of a container on the default bridge, %q", got, want)
	}
	if got := nameservers(file("inner-resolv.txt")); got != want {
		t.Errorf("an inner container's resolvers are %q, want %q (load: %s)", got, want, file("load.txt"))
	}
}

// taskSpec is a task run (no repository, no inner daemon, no capability:
// the agent's user from the start).
func taskSpec(id string, cfg sandboxcfg.Config) dispatch.RunSpec {
	return dispatch.RunSpec{
		Meta: dispatch.Meta{TaskID: id, Mode: dispatch.ModeTask, Repo: "acme/demo", Number: 7, InstallationID: 1, Attempt: 1},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: dispatch.ModeTask, Attempt: 1,
			Task: dispatch.TaskText{Title: "Probe", Body: "Probe the neighbour."}, Config: sandboxcfg.MustResolve(cfg), BudgetUSD: 1,
		},
		Token: "tok-1",
	}
}

// containerAddr is a running container's IPv4 address and its network's
// gateway, whichever network it is on.
func containerAddr(t *testing.T, name string) (addr, gw string) {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.Gateway}}{{end}}", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v: %s", name, err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("%s: want one network with an address and a gateway, got %q", name, out)
	}
	return f[0], f[1]
}

func hostGet(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s from the host: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// defaultBridgeResolvConf is the resolv.conf the engine gives a container
// on its default bridge: what sandboxes had before they got a network of
// their own.
func defaultBridgeResolvConf(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "run", "--rm", "--network", "bridge", "--entrypoint", "cat", testenv.SandboxImage(t), "/etc/resolv.conf").CombinedOutput()
	if err != nil {
		t.Fatalf("resolv.conf of a container on the default bridge: %v: %s", err, out)
	}
	return string(out)
}

// nameservers are a resolv.conf's nameserver lines, in order.
func nameservers(conf string) string {
	var ns []string
	for _, l := range strings.Split(conf, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	return strings.Join(ns, " ")
}
