package imagecache_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/imagecache"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// fakeSave builds a tarball in `docker save`'s layout; edit may change
// the files before they are written.
func fakeSave(t *testing.T, tags []string, edit func(files map[string][]byte)) ([]byte, string) {
	t.Helper()
	layer := []byte("layer tar bytes: /bin/app")
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}}})
	id := digest(cfg)
	cfgName := strings.TrimPrefix(id, "sha256:") + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": tags, "Layers": []string{"abc/layer.tar"}}})
	files := map[string][]byte{"abc/layer.tar": layer, cfgName: cfg, "manifest.json": manifest}
	if edit != nil {
		edit(files)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"abc/layer.tar", cfgName, "manifest.json"} {
		if _, ok := files[name]; !ok {
			continue
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg})
		tw.Write(files[name])
	}
	tw.Close()
	return buf.Bytes(), id
}

func TestVerify(t *testing.T) {
	t.Parallel()
	good, id := fakeSave(t, []string{"svc:1"}, nil)
	if err := imagecache.Verify(bytes.NewReader(good), "svc:1", id); err != nil {
		t.Fatalf("an intact tarball is refused: %v", err)
	}
	if err := imagecache.Verify(bytes.NewReader(good), "docker.io/library/svc:1", id); err != nil {
		t.Errorf("the same name, spelled in full, is refused: %v", err)
	}
	for name, tc := range map[string]struct {
		tar  []byte
		want string
	}{
		"layer changed": {tar: func() []byte {
			b, _ := fakeSave(t, []string{"svc:1"}, func(f map[string][]byte) { f["abc/layer.tar"] = []byte("layer tar bytes: /bin/evil") })
			return b
		}(), want: "layer 0 (abc/layer.tar) digest is sha256:"},
		"config changed": {tar: func() []byte {
			b, _ := fakeSave(t, []string{"svc:1"}, func(f map[string][]byte) {
				for n := range f {
					if strings.HasSuffix(n, ".json") && n != "manifest.json" {
						f[n] = append(f[n], ' ')
					}
				}
			})
			return b
		}(), want: "the cached file changed since it was saved"},
		"another tag": {tar: func() []byte { b, _ := fakeSave(t, []string{"svc:1", "postgres:15"}, nil); return b }(), want: "tags postgres:15"},
		"no manifest": {tar: func() []byte {
			b, _ := fakeSave(t, nil, func(f map[string][]byte) { delete(f, "manifest.json") })
			return b
		}(), want: "no readable manifest.json"},
		"not a tarball": {tar: []byte("garbage"), want: "read tarball"},
	} {
		if err := imagecache.Verify(bytes.NewReader(tc.tar), "svc:1", id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want an error with %q", name, err, tc.want)
		}
	}
	if err := imagecache.Verify(bytes.NewReader(good), "svc:1", "sha256:"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "was recorded for svc:1") {
		t.Errorf("a different recorded ID: %v", err)
	}
}

// Save records the ID, writes both files by rename and refuses what
// docker save produced when it is not the image recorded.
func TestSaveAndVerifyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, id := fakeSave(t, []string{"svc:1"}, nil)
	docker := func(served []byte) imagecache.Docker {
		return func(_ context.Context, args ...string) (string, error) {
			switch args[0] {
			case "image":
				return id + "\n", nil
			case "save":
				return "", os.WriteFile(args[2], served, 0o600)
			}
			t.Fatalf("unexpected docker %v", args)
			return "", nil
		}
	}
	if err := imagecache.Save(context.Background(), docker(good), dir, "svc:1", ""); err != nil {
		t.Fatal(err)
	}
	got, err := imagecache.VerifyFile(dir, "svc:1")
	if err != nil || got != id {
		t.Fatalf("VerifyFile = %s, %v", got, err)
	}
	// Re-tagged between the pull and the save: not cached.
	other, _ := fakeSave(t, []string{"svc:2"}, func(f map[string][]byte) { f["abc/layer.tar"] = []byte("other") })
	if err := imagecache.Save(context.Background(), docker(other), dir, "svc:2", id); err == nil {
		t.Error("a save that is not the recorded image was cached")
	}
	if _, err := os.Stat(dispatch.CachedImageFile(dir, "svc:2")); err == nil {
		t.Error("the refused save left a tarball")
	}
	// Tampered after saving.
	p := dispatch.CachedImageFile(dir, "svc:1")
	bad, _ := fakeSave(t, []string{"svc:1"}, func(f map[string][]byte) { f["abc/layer.tar"] = []byte("evil") })
	os.WriteFile(p, bad, 0o644)
	if _, err := imagecache.VerifyFile(dir, "svc:1"); err == nil || !strings.Contains(err.Error(), "changed since it was saved") {
		t.Errorf("tampered file: %v", err)
	}
	os.Remove(imagecache.IDFile(dir, "svc:1"))
	if _, err := imagecache.VerifyFile(dir, "svc:1"); err == nil || !strings.Contains(err.Error(), "no image ID recorded") {
		t.Errorf("missing sidecar: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, dispatch.CacheTmpPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
