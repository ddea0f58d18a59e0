// Package dockertest holds fixtures for tests that run the real sandbox
// image on the real engine: the host's address as containers see it, a
// service image built here (nothing can be pulled), and a git remote served
// over smart HTTP where a sandbox can reach it.
package dockertest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
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

// ServeGit serves bare (a directory ending in .git) on the bridge gateway,
// where a sandbox reaches it as host.docker.internal, behind basic auth
// that takes token as the password, until the test ends.
func ServeGit(t testing.TB, bare, token string) *gitservetest.Server {
	t.Helper()
	return gitservetest.Serve(t, bare, gitservetest.Options{Listen: net.JoinHostPort(Gateway(t), "0"), Host: "host.docker.internal", Token: token})
}
