package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/imagecache"
)

// HostDocker runs the host's docker CLI, for imagecache.Save.
func HostDocker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// CacheImage saves ref of the host's engine into the image cache dir the
// way the backend does, with its recorded ID.
func CacheImage(t testing.TB, dir, ref string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := imagecache.Save(ctx, HostDocker, dir, ref, ""); err != nil {
		t.Fatalf("cache %s: %v", ref, err)
	}
}

// ProbeImageRef is the egress tests' client image (testdata/probe).
const ProbeImageRef = "sandbox-test/probe:1"

// ProbeImage builds the probe image on the host engine.
func ProbeImage(t testing.TB) string {
	t.Helper()
	return goImage(t, "probe", ProbeImageRef)
}
