// Package dockertest holds fixtures for tests that run the real sandbox
// image on the real engine: the host's address as containers see it, a
// service image built here (nothing can be pulled), and a git remote served
// over smart HTTP where a sandbox can reach it.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
)

// ServiceImageRef is the tag ServiceImage gives the test service.
const ServiceImageRef = "sandbox-test/svc:1"

// testImageLabel carries the checksum of the service binary.
const testImageLabel = "org.sandbox-bot.test-image-sum"

// Gateway is the address of the default bridge's gateway: the host, as a
// container on that bridge reaches it (host.docker.internal with
// --add-host host.docker.internal:host-gateway).
func Gateway(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "--format",
		`{{range .IPAM.Config}}{{.Gateway}} {{end}}|{{index .Options "com.docker.network.bridge.name"}}`).Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	gws, bridge, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
	for _, f := range strings.Fields(gws) {
		if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
			return f
		}
	}
	// Engines that leave the gateway out of IPAM: the bridge interface's
	// own address is the gateway.
	if bridge == "" {
		bridge = "docker0"
	}
	ifc, err := net.InterfaceByName(bridge)
	if err != nil {
		t.Fatalf("the default bridge has no gateway in IPAM and no interface %s: %v", bridge, err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatalf("bridge interface %s has no IPv4 address", bridge)
	return ""
}

// ServiceImage builds the test service (testdata/svc, a static binary)
// into a FROM-scratch image on the host engine and returns its reference.
// It uses `docker import`, which needs no builder.
func ServiceImage(t testing.TB) string {
	t.Helper()
	return goImage(t, "svc", ServiceImageRef)
}

// goImage builds testdata/<name> into a FROM-scratch image ref whose
// entrypoint is the binary.
func goImage(t testing.TB, name, ref string) string {
	t.Helper()
	testenv.Docker(t)
	bin := filepath.Join(t.TempDir(), name)
	src := filepath.Join(testenv.ModuleRoot(t), "dispatch", "docker", "dockertest", "testdata", name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test image %s: %v\n%s", name, err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// The build is reproducible (-trimpath), so an image carrying the same
	// checksum is this one: importing again would only leave the old image
	// dangling.
	sum := fmt.Sprintf("%x", sha256.Sum256(exe))
	if out, err := exec.Command("docker", "image", "inspect", "--format", `{{index .Config.Labels "`+testImageLabel+`"}}`, ref).Output(); err == nil && strings.TrimSpace(string(out)) == sum {
		return ref
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(exe)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(exe)
	tw.Close()
	imp := exec.Command("docker", "import", "--change", `ENTRYPOINT ["/`+name+`"]`, "--change", "LABEL "+testImageLabel+"="+sum, "-", ref)
	imp.Stdin = &layer
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import the test image %s: %v\n%s", name, err, out)
	}
	exec.Command("docker", "image", "prune", "--force", "--filter", "label="+testImageLabel).Run()
	return ref
}

// GitServer serves one bare repository over smart HTTP (git http-backend)
// on the bridge gateway, behind basic auth that takes one token as the
// password, the way GitHub takes an installation token.
type GitServer struct {
	// URL is the clone URL as a sandbox sees it.
	URL string

	mu       sync.Mutex
	token    string
	pushes   int
	rejected int
}

// ServeGit serves bare (a directory ending in .git) until the test ends.
func ServeGit(t testing.TB, bare, token string) *GitServer {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(bare),
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=x-access-token",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		},
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Gateway(t), "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway: %v", err)
	}
	g := &GitServer{token: token}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allowed(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	_, port, _ := net.SplitHostPort(l.Addr().String())
	g.URL = "http://host.docker.internal:" + port + "/" + filepath.Base(bare)
	return g
}

func (g *GitServer) allowed(r *http.Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ok := false
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Basic ") {
		if raw, err := base64.StdEncoding.DecodeString(a[len("Basic "):]); err == nil {
			_, pass, _ := strings.Cut(string(raw), ":")
			ok = pass == g.token
		}
	}
	if !ok {
		g.rejected++
		return false
	}
	if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
		g.pushes++
	}
	return true
}

// Pushes counts authenticated pushes.
func (g *GitServer) Pushes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pushes
}

// SetToken changes the token the server accepts (a refreshed token).
func (g *GitServer) SetToken(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.token = token
}
