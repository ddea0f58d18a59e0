package setupcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Inputs are what a key is made of: everything that decides what setup
// produces and can be known before it runs.
type Inputs struct {
	Repo  string   `json:"repo"`
	Setup []string `json:"setup"`
	Paths []string `json:"paths"`
	// Files are the key files' digests by path ("sha256:…", "missing", or
	// "symlink:<target>").
	Files map[string]string `json:"files"`
	// Tools identifies the image's toolchains (ToolStamp), so a new Node.js
	// or Python in the image does not restore modules built for the old.
	Tools string `json:"tools"`
}

// Key is the entry name of in: a SHA-256 over its canonical JSON.
func Key(in Inputs) string {
	in.Repo = strings.ToLower(in.Repo)
	b, _ := json.Marshal(struct {
		V int `json:"v"`
		Inputs
	}{Version, in}) // map keys marshal sorted: canonical
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ecosystem is what a lock file says about setup: the files that decide
// what it installs and where it puts it.
type ecosystem struct {
	locks []string // any one of these marks the ecosystem
	keys  []string // key files besides the lock, when present
	paths []string // what setup produces in the checkout
}

var ecosystems = []ecosystem{
	{locks: []string{"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock", "bun.lockb"},
		keys: []string{"package.json", ".npmrc", ".yarnrc.yml", ".nvmrc", ".node-version"}, paths: []string{"node_modules"}},
	{locks: []string{"uv.lock", "poetry.lock", "Pipfile.lock", "requirements.txt", "requirements-dev.txt"},
		keys: []string{"pyproject.toml", ".python-version"}, paths: []string{".venv"}},
	{locks: []string{"Gemfile.lock"}, keys: []string{"Gemfile", ".ruby-version"}, paths: []string{"vendor/bundle"}},
	{locks: []string{"composer.lock"}, keys: []string{"composer.json"}, paths: []string{"vendor"}},
}

// Defaults are the key files and paths of the ecosystems whose lock files
// dir holds at its top level. Go is not among them: its module cache lives
// outside the checkout (the docker backend's package cache keeps it).
func Defaults(dir string) (keyFiles, paths []string) {
	for _, e := range ecosystems {
		found := false
		for _, l := range e.locks {
			if exists(filepath.Join(dir, l)) {
				keyFiles = append(keyFiles, l)
				found = true
			}
		}
		if !found {
			continue
		}
		for _, k := range e.keys {
			if exists(filepath.Join(dir, k)) {
				keyFiles = append(keyFiles, k)
			}
		}
		paths = append(paths, e.paths...)
	}
	return keyFiles, paths
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// HashFiles digests the key files names (relative to dir). A link is keyed
// by its target, never followed: it may point at anything in the sandbox.
func HashFiles(dir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		st, err := os.Lstat(p)
		switch {
		case os.IsNotExist(err):
			out[name] = "missing"
			continue
		case err != nil:
			return nil, fmt.Errorf("setup cache key file %s: %w", name, err)
		case st.Mode()&os.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			out[name] = "symlink:" + t
			continue
		case !st.Mode().IsRegular():
			out[name] = "not a regular file"
			continue
		}
		f, err := openRegular(p)
		if err != nil {
			return nil, fmt.Errorf("setup cache key file %s: %w", name, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("setup cache key file %s: %w", name, err)
		}
		out[name] = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// toolNames are the toolchains whose version decides what setup builds.
var toolNames = []string{"node", "npm", "python3", "pip", "ruby", "php", "go", "cargo"}

// ToolStamp names each toolchain on path with its resolved file's size and
// modification time: cheap (no process starts) and different whenever the
// image ships another build.
func ToolStamp(path string) string {
	var parts []string
	for _, name := range toolNames {
		for _, dir := range filepath.SplitList(path) {
			p, err := filepath.EvalSymlinks(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				parts = append(parts, fmt.Sprintf("%s=%s:%d:%d", name, p, st.Size(), st.ModTime().Unix()))
				break
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}
