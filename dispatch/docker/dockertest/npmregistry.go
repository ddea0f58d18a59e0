package dockertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// NPMPackage is one package version the registry serves: index.js holds
// Body.
type NPMPackage struct {
	Name, Version, Body string
}

// NPMRegistry is a tiny npm registry on the bridge gateway, so `npm ci`
// in a sandbox installs from it without the internet: packuments at
// /<name>, tarballs at /<name>/-/<name>-<version>.tgz. It counts the
// tarballs it served.
type NPMRegistry struct {
	// URL is how a sandbox reaches it (host.docker.internal).
	URL string

	mu       sync.Mutex
	tarballs map[string][]byte // path -> tgz
	served   int
	srv      *http.Server
}

// ServeNPM starts a registry on the bridge gateway serving pkgs; it stops
// when the test ends.
func ServeNPM(t testing.TB, pkgs ...NPMPackage) *NPMRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", Gateway(t)+":0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	r := &NPMRegistry{URL: "http://host.docker.internal:" + port, tarballs: map[string][]byte{}}
	for _, p := range pkgs {
		r.Add(t, p)
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln) //nolint:errcheck // ends on Close
	t.Cleanup(func() { r.srv.Close() })
	return r
}

// Add serves one more package version.
func (r *NPMRegistry) Add(t testing.TB, p NPMPackage) {
	t.Helper()
	tgz, err := npmTarball(p)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.tarballs[npmTarballPath(p)] = tgz
	r.mu.Unlock()
}

func npmTarballPath(p NPMPackage) string {
	return fmt.Sprintf("/%s/-/%s-%s.tgz", p.Name, p.Name, p.Version)
}

func npmTarball(p NPMPackage) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	manifest, _ := json.Marshal(map[string]string{"name": p.Name, "version": p.Version, "main": "index.js"})
	for _, f := range []struct {
		name string
		body []byte
	}{{"package/package.json", manifest}, {"package/index.js", []byte(p.Body)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func integrity(tgz []byte) string {
	sum := sha512.Sum512(tgz)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// ServeHTTP answers packuments and tarballs.
func (r *NPMRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tgz, ok := r.tarballs[req.URL.Path]; ok {
		r.served++
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tgz)
		return
	}
	name := strings.Trim(req.URL.Path, "/")
	versions := map[string]any{}
	latest := ""
	for path, tgz := range r.tarballs {
		if !strings.HasPrefix(path, "/"+name+"/-/") {
			continue
		}
		v := strings.TrimSuffix(strings.TrimPrefix(path, "/"+name+"/-/"+name+"-"), ".tgz")
		versions[v] = map[string]any{"name": name, "version": v, "dist": map[string]string{"tarball": r.URL + path, "integrity": integrity(tgz)}}
		latest = max(latest, v)
	}
	if len(versions) == 0 {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"name": name, "versions": versions, "dist-tags": map[string]string{"latest": latest}})
}

// Served is how many tarballs the registry sent.
func (r *NPMRegistry) Served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

// Project is the files of an npm project that depends on pkgs (exact
// versions) from this registry: package.json, a package-lock.json that
// `npm ci` accepts, an .npmrc pointing at the registry and a .gitignore
// for node_modules.
func (r *NPMRegistry) Project(name string, pkgs ...NPMPackage) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	deps := map[string]string{}
	packages := map[string]any{}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	for _, p := range pkgs {
		deps[p.Name] = p.Version
		path := npmTarballPath(p)
		packages["node_modules/"+p.Name] = map[string]any{"version": p.Version, "resolved": r.URL + path, "integrity": integrity(r.tarballs[path])}
	}
	packages[""] = map[string]any{"name": name, "version": "1.0.0", "dependencies": deps}
	pj, _ := json.MarshalIndent(map[string]any{"name": name, "version": "1.0.0", "private": true, "dependencies": deps}, "", "  ")
	lock, _ := json.MarshalIndent(map[string]any{"name": name, "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": packages}, "", "  ")
	return map[string]string{
		"package.json":      string(pj) + "\n",
		"package-lock.json": string(lock) + "\n",
		".npmrc":            "registry=" + r.URL + "/\naudit=false\nfund=false\nupdate-notifier=false\n",
		".gitignore":        "node_modules\n",
	}
}
