package sandboxinit_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// tamperLayer rewrites a cached `docker save` tarball with one byte of
// its first layer changed, the way a sandbox that got write access to a
// shared cache would slip its own binary in.
func tamperLayer(t *testing.T, path string) {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(in)), tar.NewWriter(&out)
	changed := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !changed && strings.HasSuffix(h.Name, "layer.tar") && len(body) > 600 {
			body[600] ^= 0xff // inside the first file's content
			changed = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	if !changed {
		t.Fatalf("no layer in %s", path)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A cached image whose content no longer matches the ID recorded when it
// was saved is refused before it is loaded: with no registry to pull from,
// the start fails, naming the cache file and the digest mismatch, and no
// service runs from it.
func TestTamperedCachedImageIsRefused(t *testing.T) {
	img := testenv.SandboxImage(t)
	cache := cachedService(t)
	tamperLayer(t, dispatch.CachedImageFile(filepath.Join(cache, "images"), dockertest.ServiceImageRef))
	out := t.TempDir()
	order := writeOrder(t, t.TempDir(), sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
		"web": {Image: dockertest.ServiceImageRef, Ports: []int{8080}},
	}})
	args := append(sandboxArgs(t, order, out, cache), "--rm", img, "--", "touch", "/sandbox/out/runner-ran")
	logs, err := dockerRun(t, args...)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3 (sandbox start failed)\n%s", err, logs)
	}
	r := readResult(t, out)
	for _, w := range []string{"image " + dockertest.ServiceImageRef, "its cached copy was refused", "digest is sha256:", "the cached file changed since it was saved"} {
		if r.Error == nil || !strings.Contains(r.Error.Message, w) {
			t.Errorf("receipt error lacks %q: %+v", w, r.Error)
		}
	}
	if !strings.Contains(logs, `"message":"image cache: entry refused"`) {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
	if strings.Contains(logs, `"message":"image loaded from the cache"`) {
		t.Error("the tampered image was loaded")
	}
	if _, err := os.Stat(filepath.Join(out, "runner-ran")); err == nil {
		t.Error("the runner ran on a tampered image")
	}
}
