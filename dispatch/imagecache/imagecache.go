// Package imagecache is the sandbox image cache's file format, shared by
// the docker backend (which seeds it) and the sandbox's init (which loads
// from it and saves what it pulled): a `docker save` tarball per image
// reference, beside a sidecar holding the image ID recorded when the image
// was saved. A tarball is loaded only when its content hashes to that ID:
// the config's digest is the image ID, and each layer's digest is the
// config's diff_id for it. A cache file that someone changed is refused
// rather than loaded into a sandbox.
package imagecache

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// IDFile is the sidecar of ref's tarball in dir: the image ID, one line.
func IDFile(dir, ref string) string { return dispatch.CachedImageFile(dir, ref) + ".id" }

// ReadID returns the image ID recorded for ref in dir.
func ReadID(dir, ref string) (string, error) {
	b, err := os.ReadFile(IDFile(dir, ref))
	if err != nil {
		return "", fmt.Errorf("no image ID recorded for %s (a cache entry is loaded only beside its %s sidecar): %w", ref, filepath.Base(IDFile(dir, ref)), err)
	}
	id := strings.TrimSpace(string(b))
	if !validID(id) {
		return "", fmt.Errorf("%s: %q is not an image ID (sha256:<64 hex>)", IDFile(dir, ref), id)
	}
	return id, nil
}

func validID(id string) bool {
	h, ok := strings.CutPrefix(id, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// maxJSON bounds the files kept in memory while a tarball is read: the
// manifest and the config (which, in the OCI layout of newer engines, is a
// blob named by its digest like the layers).
const maxJSON = 4 << 20

type manifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

type imageConfig struct {
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Verify reads a `docker save` tarball of one image and checks that its
// config hashes to id, that its layers hash to the config's diff_ids, and
// that it tags nothing but ref.
func Verify(r io.Reader, ref, id string) error {
	if !validID(id) {
		return fmt.Errorf("%q is not an image ID", id)
	}
	digests := map[string]string{}
	jsons := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tarball: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		sum := sha256.New()
		var w io.Writer = sum
		var buf bytes.Buffer
		if h.Size <= maxJSON {
			w = io.MultiWriter(sum, &buf)
		}
		if _, err := io.Copy(w, tr); err != nil {
			return fmt.Errorf("read tarball %s: %w", name, err)
		}
		digests[name] = "sha256:" + hex.EncodeToString(sum.Sum(nil))
		if b := bytes.TrimSpace(buf.Bytes()); len(b) > 0 && (b[0] == '{' || b[0] == '[') {
			jsons[name] = b
		}
	}
	var manifest []manifestEntry
	if err := json.Unmarshal(jsons["manifest.json"], &manifest); err != nil {
		return fmt.Errorf("tarball has no readable manifest.json: %v", err)
	}
	if len(manifest) != 1 {
		return fmt.Errorf("tarball holds %d images, want exactly 1", len(manifest))
	}
	m := manifest[0]
	for _, tag := range m.RepoTags {
		if normalizeRef(tag) != normalizeRef(ref) {
			return fmt.Errorf("tarball tags %s, not only %s", tag, ref)
		}
	}
	cfgName := path.Clean(m.Config)
	if got := digests[cfgName]; got != id {
		return fmt.Errorf("image config digest is %s, but %s was recorded for %s: the cached file changed since it was saved", orNone(got), id, ref)
	}
	var cfg imageConfig
	if err := json.Unmarshal(jsons[cfgName], &cfg); err != nil {
		return fmt.Errorf("image config %s: %v", cfgName, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return fmt.Errorf("image config lists %d layers, the manifest %d", len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	for i, l := range m.Layers {
		if got := digests[path.Clean(l)]; got != cfg.RootFS.DiffIDs[i] {
			return fmt.Errorf("layer %d (%s) digest is %s, the image config says %s: the cached file changed since it was saved", i, l, orNone(got), cfg.RootFS.DiffIDs[i])
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "missing"
	}
	return s
}

// normalizeRef makes "redis", "redis:latest", "docker.io/library/redis"
// one name, as the engine does.
func normalizeRef(ref string) string {
	r := strings.TrimPrefix(strings.TrimPrefix(ref, "docker.io/"), "library/")
	last := r[strings.LastIndex(r, "/")+1:]
	if !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		r += ":latest"
	}
	return r
}

// VerifyFile is Verify on the cached tarball of ref in dir against its
// recorded ID, which it returns.
func VerifyFile(dir, ref string) (string, error) {
	id, err := ReadID(dir, ref)
	if err != nil {
		return "", err
	}
	f, err := os.Open(dispatch.CachedImageFile(dir, ref))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := Verify(f, ref, id); err != nil {
		return "", fmt.Errorf("%s: %w", f.Name(), err)
	}
	return id, nil
}

// Docker runs one docker CLI command and returns its stdout.
type Docker func(ctx context.Context, args ...string) (string, error)

// Save writes ref into dir. id is the image ID the caller recorded when it
// got the image (pulled it, built it); "" looks it up now. What `docker
// save` produced must hash to id, so an image re-tagged in between is not
// cached under ref. The tarball and the sidecar appear by rename; a killed
// save leaves only temporary files (dispatch.CacheTmpPrefix), and a
// tarball whose sidecar is stale is refused at load, never loaded.
func Save(ctx context.Context, docker Docker, dir, ref, id string) error {
	if id == "" {
		out, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
		if err != nil {
			return err
		}
		id = strings.TrimSpace(out)
	}
	stamp := fmt.Sprintf("%s%d-%d", dispatch.CacheTmpPrefix, os.Getpid(), time.Now().UnixNano())
	tmp := filepath.Join(dir, stamp+".tar")
	tmpID := filepath.Join(dir, stamp+".id")
	defer os.Remove(tmp)
	defer os.Remove(tmpID)
	if _, err := docker(ctx, "save", "--output", tmp, ref); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = Verify(f, ref, id)
	f.Close()
	if err != nil {
		return fmt.Errorf("image cache: %s as saved is not the image recorded (%s): %w", ref, id, err)
	}
	// docker save writes 0600; the init reads as root, but an operator
	// looking at the cache should not need to be.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(tmpID, []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	if err := os.Rename(tmp, dispatch.CachedImageFile(dir, ref)); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	if err := os.Rename(tmpID, IDFile(dir, ref)); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	return nil
}
