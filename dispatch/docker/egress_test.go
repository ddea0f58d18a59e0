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

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Names the egress test gives the bridge gateway inside the sandbox: one
// on the allowlist, one off it. Both are the test's own servers.
const (
	egressAllowedHost = "egress-ok.test"
	egressDeniedHost  = "egress-blocked.test"
	// Listed by name only: its address (the gateway) is private.
	egressPrivateHost = "egress-private.test"
	// Listed without a port: 443 and 80 only.
	egressPortHost = "egress-port.test"
)

// serveOnGateway runs an HTTP server on the bridge gateway, where a
// sandbox reaches the host, and counts the requests it gets.
func serveOnGateway(t *testing.T, body string) (port string, hits *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(dockertest.Gateway(t), "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway: %v", err)
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

// egressFixture is the sandbox fixture with the two test names mapped to
// the gateway.
func egressFixture(t *testing.T, iso dispatch.Isolation) *fixture {
	t.Helper()
	img := testenv.SandboxImage(t)
	f := &fixture{svc: dockertest.ServiceImage(t)}
	f.remote = runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	f.git = dockertest.ServeGit(t, f.remote.Dir, "tok-1")
	f.cache = t.TempDir()
	b, err := docker.New(docker.Options{
		Image:     img,
		Isolation: iso,
		DataDir:   t.TempDir(),
		CacheDir:  f.cache,
		StopGrace: 30 * time.Second,
		ExtraHosts: []string{
			"host.docker.internal:host-gateway",
			egressAllowedHost + ":host-gateway",
			egressDeniedHost + ":host-gateway",
			egressPrivateHost + ":host-gateway",
			egressPortHost + ":host-gateway",
		},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CacheImage(ctx, f.svc); err != nil {
		t.Fatal(err)
	}
	return f
}

// With network.allow set, the agent (the command harness, as the sandbox
// user) reaches an allowed host through the proxy, gets a 403 from the
// proxy for a host off the list, for a listed name whose address is
// private and not listed, and for a port the entry does not name (plain
// HTTP and CONNECT), cannot go around the proxy to the host directly, and
// still reaches its service on the inner network; the runner clones and
// pushes through the proxy (the remote's host is always allowed). In the
// caps profile and behind gVisor.
func TestEgressAllowlist(t *testing.T) {
	dockertest.ForEachProfile(t, egressAllowlist)
}

func egressAllowlist(t *testing.T, iso dispatch.Isolation) {
	f := egressFixture(t, iso)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	gw := dockertest.Gateway(t)
	okPort, okHits := serveOnGateway(t, "allowed-ok")
	badPort, badHits := serveOnGateway(t, "should-never-be-seen")
	privPort, privHits := serveOnGateway(t, "private-should-never-be-seen")

	cfg := sandboxcfg.Config{
		Harness:  "command",
		Services: webService(f.svc),
		Network: sandboxcfg.Network{Allow: []string{
			egressAllowedHost + ":" + okPort, gw + ":" + okPort, // the name and its private address
			egressPrivateHost + ":" + privPort, // the name only
			egressPortHost,                     // 443 and 80 only
			"*.npmjs.org",
		}},
		Env: map[string]string{
			"OK_URL":      "http://" + egressAllowedHost + ":" + okPort + "/",
			"DENIED_URL":  "http://" + egressDeniedHost + ":" + badPort + "/",
			"PRIVATE_URL": "http://" + egressPrivateHost + ":" + privPort + "/",
			"PORT_URL":    "http://" + egressPortHost + ":" + okPort + "/",
			"DIRECT_URL":  "http://" + gw + ":" + badPort + "/",
			"AROUND_URL":  "http://" + gw + ":" + okPort + "/",
			"WEB_URL":     "http://{web}/health",
		},
		Command: `set -u
echo "$https_proxy" > proxy.txt
curl -sS -m 20 "$OK_URL" > allowed.txt 2>&1 || echo " curl=$?" >> allowed.txt
curl -sS -m 20 -o denied-body.txt -w '%{http_code}' "$DENIED_URL" > denied.txt 2>/dev/null || true
curl -sS -m 20 -o private-body.txt -w '%{http_code}' "$PRIVATE_URL" > private.txt 2>/dev/null || true
curl -sS -m 20 -o port-body.txt -w '%{http_code}' "$PORT_URL" > port.txt 2>/dev/null || true
curl -sS -m 20 --proxytunnel "$OK_URL" > tunnel.txt 2>&1 || echo " curl=$?" >> tunnel.txt
curl -sS -m 20 --proxytunnel "$PORT_URL" > port-tunnel.txt 2>&1; echo " curl=$?" >> port-tunnel.txt
curl -sS -m 20 --noproxy '*' "$DIRECT_URL" > direct.txt 2>&1; echo "curl=$?" >> direct.txt
curl -sS -m 20 --noproxy '*' "$AROUND_URL" > around.txt 2>&1; echo "curl=$?" >> around.txt
curl -sS -m 20 "$WEB_URL" > service.txt 2>&1 || echo " curl=$?" >> service.txt
echo '{"type":"tool_use","tool":"write","input":{"filePath":"allowed.txt"}}'
while [ ! -e /sandbox/out/go ]; do sleep 0.1; done
echo 'Checked the network.'`,
	}
	spec := f.spec("T-E6E55001", dispatch.ModeExecute, cfg)
	f.submit(t, ctx, spec)
	id := spec.Meta.TaskID
	w := wait(ctx, f.b, id)
	w.until(t, ctx, "the agent's write", toolIs("write"))

	// The inner containers are fenced too: the rules are in place in the
	// running sandbox (read from the host as root; the agent cannot).
	out := dockertest.SandboxRules(t, "sandbox-"+id+"-"+string(spec.Meta.Mode))
	for _, want := range []string{
		"-A OUTPUT -m owner --uid-owner 1000 -j SANDBOX-EGRESS",
		"-A SANDBOX-EGRESS -p tcp -j REJECT --reject-with tcp-reset",
		"-A DOCKER-USER -i br-+ -j SANDBOX-EGRESS-FWD",
		"-A SANDBOX-EGRESS-FWD -j REJECT --reject-with icmp-port-unreachable",
	} {
		if want = dockertest.Rule(iso, want); !strings.Contains(out, want) {
			t.Errorf("sandbox rules lack %q:\n%s", want, out)
		}
	}
	if err := os.WriteFile(filepath.Join(f.b.OutputDir(id), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := w.result(t)
	res, err := f.b.Result(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 || res.Status != dispatch.StatusCompleted {
		t.Fatalf("run = %+v, result %s (%+v)", st, res.Status, res.Error)
	}
	branch := spec.Order.TargetBranch
	file := func(name string) string {
		t.Helper()
		got, ok := f.remote.File(t, branch, name)
		if !ok {
			t.Fatalf("%s not pushed to %s (the push goes through the proxy)", name, branch)
		}
		return strings.TrimSpace(got)
	}
	if got := file("proxy.txt"); got != "http://127.0.0.1:3128" {
		t.Errorf("the agent's https_proxy = %q", got)
	}
	if got := file("allowed.txt"); got != "allowed-ok" {
		t.Errorf("allowed host through the proxy: %q", got)
	}
	if got := file("denied.txt"); got != "403" {
		t.Errorf("host off the list through the proxy answered %q, want 403", got)
	}
	if got := file("denied-body.txt"); !strings.Contains(got, egressDeniedHost+" is not allowed") {
		t.Errorf("403 body %q does not say what was denied", got)
	}
	if got := file("private.txt"); got != "403" {
		t.Errorf("a listed name on an unlisted private address answered %q, want 403", got)
	}
	if got := file("private-body.txt"); !strings.Contains(got, "resolves to the private address "+gw) {
		t.Errorf("403 body %q does not name the private address", got)
	}
	if got := file("port.txt"); got != "403" {
		t.Errorf("a port the entry does not name answered %q, want 403", got)
	}
	if got := file("port-body.txt"); !strings.Contains(got, "port "+okPort+" is not allowed") {
		t.Errorf("403 body %q does not name the port", got)
	}
	if got := file("tunnel.txt"); got != "allowed-ok" {
		t.Errorf("CONNECT to a listed host and port: %q", got)
	}
	// curl's exit code 56: the proxy refused the CONNECT.
	if got := file("port-tunnel.txt"); !strings.Contains(got, "403") || !strings.HasSuffix(got, "curl=56") {
		t.Errorf("CONNECT to a port the entry does not name: %q, want a 403 (curl=56)", got)
	}
	// curl's exit code 7: connection refused, the REJECT's TCP reset.
	if got := file("direct.txt"); !strings.HasSuffix(got, "curl=7") {
		t.Errorf("direct connection around the proxy: %q, want it refused (curl=7)", got)
	}
	if got := file("around.txt"); !strings.HasSuffix(got, "curl=7") {
		t.Errorf("direct connection to the allowed server around the proxy: %q, want it refused", got)
	}
	if got := file("service.txt"); got != "ok" {
		t.Errorf("service on the inner network: %q", got)
	}
	if n := badHits.Load() + privHits.Load(); n != 0 {
		t.Errorf("the servers off the list got %d requests", n)
	}
	if okHits.Load() != 2 {
		t.Errorf("the allowed server got %d requests, want 2 (GET and CONNECT through the proxy only)", okHits.Load())
	}
	log := sandboxLog(t, id, spec.Meta.Mode)
	if !strings.Contains(log, `"message":"egress allowlist enforced"`) {
		t.Error("sandbox log lacks the allowlist's start")
	}
	want := []string{
		`"host":"` + egressDeniedHost + `","method":"GET","why":"not in network.allow of .sandbox.yml"`,
		`"host":"` + egressPrivateHost + `","method":"GET","why":"` + egressPrivateHost + ` resolves to the private address ` + gw,
		`"host":"` + egressPortHost + `","method":"GET","why":"port ` + okPort + ` is not allowed by ` + egressPortHost,
		`"host":"` + egressPortHost + `","method":"CONNECT","why":"port ` + okPort + ` is not allowed by ` + egressPortHost,
	}
	var denials []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"message":"egress denied"`) {
			denials = append(denials, line)
		}
	}
	if len(denials) != len(want) {
		t.Errorf("%d denials logged, want %d:\n%s", len(denials), len(want), strings.Join(denials, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(denials, "\n"), w) {
			t.Errorf("no denial logged as %s among:\n%s", w, strings.Join(denials, "\n"))
		}
	}
	if strings.Contains(log, "tok-1") {
		t.Error("the token reached the sandbox log")
	}
}

// Task mode runs unprivileged, so nothing can fence the agent in: a task
// that asks for an allowlist fails with a reason instead of running open.
func TestEgressAllowlistFailsClosedWithoutRoot(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: "echo ran > ran.txt"}
	spec := f.spec("T-E6E55002", dispatch.ModeTask, cfg)
	// No configuration resolves to this (task mode cannot fence its
	// network): the sandbox refuses it all the same.
	spec.Order.Config.Network.Allow = []string{"example.com"}
	spec.Order.CloneURL, spec.Order.TargetBranch, spec.Token = "", "", ""
	f.submit(t, ctx, spec)
	st := wait(ctx, f.b, spec.Meta.TaskID).result(t)
	res, err := f.b.Result(ctx, spec.Meta.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusFailed || st.ExitCode == 0 || res.Error == nil || !strings.Contains(res.Error.Message, "network.allow") {
		t.Fatalf("result = %s (%+v), exit %d; want failed naming network.allow", res.Status, res.Error, st.ExitCode)
	}
	t.Logf("refused: %s", res.Error.Message)
	if _, err := os.Stat(filepath.Join(f.b.OutputDir(spec.Meta.TaskID), "artifacts", "ran.txt")); err == nil {
		t.Error("the agent ran although the allowlist could not be enforced")
	}
}
