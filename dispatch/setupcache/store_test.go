package setupcache_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/setupcache"
)

func key(s string) string {
	return setupcache.Key(setupcache.Inputs{Repo: "o/r", Setup: []string{s}})
}

func save(t *testing.T, st *setupcache.Store, k, repo string, payload []byte) setupcache.Manifest {
	t.Helper()
	m, err := st.Save(setupcache.Manifest{Key: k, Repo: repo, Commit: "abc", Paths: []string{"node_modules"}}, bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	return m
}

func TestSaveRestoreRoundTrip(t *testing.T) {
	st := &setupcache.Store{Dir: t.TempDir()}
	payload := bytes.Repeat([]byte("node_modules/left-pad/index.js\n"), 1000)
	k := key("npm ci")
	m := save(t, st, k, "O/R", payload)
	if m.Repo != "o/r" || m.Size == 0 || len(m.SHA256) != 64 || m.Size >= int64(len(payload)) {
		t.Errorf("manifest %+v: want the repo in lower case and a compressed, digested archive", m)
	}
	var out bytes.Buffer
	got, err := st.Restore(k, "o/r", &out)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if !bytes.Equal(out.Bytes(), payload) || got.SHA256 != m.SHA256 {
		t.Errorf("restored %d bytes (manifest %s), want the %d saved", out.Len(), got.SHA256, len(payload))
	}
	if _, err := st.Restore(key("other"), "o/r", &out); !errors.Is(err, setupcache.ErrMiss) {
		t.Errorf("Restore of an unknown key: %v, want ErrMiss", err)
	}
}

func TestRestoreRefusesAnotherRepository(t *testing.T) {
	st := &setupcache.Store{Dir: t.TempDir()}
	k := key("npm ci")
	save(t, st, k, "a/one", []byte("x"))
	var out bytes.Buffer
	_, err := st.Restore(k, "b/two", &out)
	var c *setupcache.CorruptError
	if !errors.As(err, &c) || !strings.Contains(err.Error(), `saved by repository "a/one", not "b/two"`) || out.Len() != 0 {
		t.Fatalf("Restore in another repository: %v (%d bytes written), want a refusal", err, out.Len())
	}
}

func TestRestoreRefusesACorruptArchive(t *testing.T) {
	dir := t.TempDir()
	st := &setupcache.Store{Dir: dir}
	k := key("npm ci")
	save(t, st, k, "o/r", bytes.Repeat([]byte("abc"), 5000))
	archive := filepath.Join(dir, k+".tar.zst")
	b, _ := os.ReadFile(archive)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(archive, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err := st.Restore(k, "o/r", &out)
	var c *setupcache.CorruptError
	if !errors.As(err, &c) || out.Len() != 0 {
		t.Fatalf("Restore of a changed archive: %v (%d bytes written), want a *CorruptError before any byte", err, out.Len())
	}
	if _, err := os.Stat(archive); !os.IsNotExist(err) {
		t.Errorf("the refused entry is still there: %v", err)
	}
	if _, err := st.Restore(k, "o/r", &out); !errors.Is(err, setupcache.ErrMiss) {
		t.Errorf("after the refusal: %v, want a miss", err)
	}
}

func TestRestoreRefusesALinkAsArchive(t *testing.T) {
	dir := t.TempDir()
	st := &setupcache.Store{Dir: dir}
	k := key("npm ci")
	save(t, st, k, "o/r", []byte("x"))
	archive := filepath.Join(dir, k+".tar.zst")
	os.Remove(archive)
	secret := filepath.Join(t.TempDir(), "token")
	os.WriteFile(secret, []byte("ghs_secret"), 0o600)
	if err := os.Symlink(secret, archive); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := st.Restore(k, "o/r", &out); err == nil || out.Len() != 0 {
		t.Fatalf("Restore through a link: %v, %q", err, out.String())
	}
}

func TestSaveBoundsOneEntry(t *testing.T) {
	dir := t.TempDir()
	st := &setupcache.Store{Dir: dir, MaxEntryBytes: 1024}
	noise := make([]byte, 64<<10)
	for i := range noise {
		noise[i] = byte(i*7919 + i>>3)
	}
	_, err := st.Save(setupcache.Manifest{Key: key("big"), Repo: "o/r"}, bytes.NewReader(noise))
	if !errors.Is(err, setupcache.ErrTooLarge) {
		t.Fatalf("Save past the bound: %v, want ErrTooLarge", err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("a refused save left %d files", len(des))
	}
}

func TestEvictRemovesTheLeastRecentlyUsed(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := &setupcache.Store{Dir: dirA}, &setupcache.Store{Dir: dirB}
	payload := func(seed byte) []byte {
		p := make([]byte, 32<<10)
		for i := range p {
			p[i] = byte(i*31) ^ seed
		}
		return p
	}
	old := save(t, a, key("old"), "o/a", payload(1))
	mid := save(t, b, key("mid"), "o/b", payload(2))
	fresh := save(t, a, key("fresh"), "o/a", payload(3))
	base := time.Now().Add(-time.Hour)
	for i, m := range []setupcache.Manifest{old, mid, fresh} {
		dir := dirA
		if m.Key == mid.Key {
			dir = dirB
		}
		ts := base.Add(time.Duration(i) * time.Minute)
		os.Chtimes(filepath.Join(dir, m.Key+".json"), ts, ts)
	}
	// A restore is a use: the oldest entry becomes the newest.
	var sink bytes.Buffer
	if _, err := a.Restore(old.Key, "o/a", &sink); err != nil {
		t.Fatal(err)
	}
	removed, err := setupcache.Evict([]string{dirA, dirB}, old.Size+fresh.Size+mid.Size/2)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != mid.Key {
		t.Fatalf("evicted %v, want only the least recently used entry %s", removed, mid.Key)
	}
	if got := setupcache.DirSize(dirA); got != old.Size+fresh.Size {
		t.Errorf("repository a keeps %d bytes, want both its entries (%d)", got, old.Size+fresh.Size)
	}
}

func TestKeyChangesWithEveryInput(t *testing.T) {
	base := setupcache.Inputs{Repo: "o/r", Setup: []string{"npm ci"}, Paths: []string{"node_modules"},
		Files: map[string]string{"package-lock.json": "sha256:1"}, Tools: "node=/usr/bin/node:1:2"}
	k := setupcache.Key(base)
	if setupcache.Key(base) != k {
		t.Fatal("Key is not deterministic")
	}
	variants := map[string]func(*setupcache.Inputs){
		"repo":  func(in *setupcache.Inputs) { in.Repo = "o/other" },
		"setup": func(in *setupcache.Inputs) { in.Setup = []string{"npm install"} },
		"paths": func(in *setupcache.Inputs) { in.Paths = []string{".venv"} },
		"files": func(in *setupcache.Inputs) { in.Files = map[string]string{"package-lock.json": "sha256:2"} },
		"tools": func(in *setupcache.Inputs) { in.Tools = "node=/usr/bin/node:1:3" },
	}
	for name, change := range variants {
		in := base
		change(&in)
		if setupcache.Key(in) == k {
			t.Errorf("changing %s keeps the key", name)
		}
	}
	if up := base; true {
		up.Repo = "O/R"
		if setupcache.Key(up) != k {
			t.Error("the repository's case changes the key")
		}
	}
}

func TestDefaultsAndKeyFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"package.json": "{}", "package-lock.json": "{}", ".nvmrc": "22", "go.sum": ""} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	os.Symlink("/run/sandbox-runner/work-order.json", filepath.Join(dir, "yarn.lock"))
	keys, paths := setupcache.Defaults(dir)
	if strings.Join(paths, ",") != "node_modules" {
		t.Errorf("paths %v, want node_modules", paths)
	}
	if strings.Join(keys, ",") != "package-lock.json,yarn.lock,package.json,.nvmrc" {
		t.Errorf("key files %v", keys)
	}
	sums, err := setupcache.HashFiles(dir, append(keys, "absent.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if sums["yarn.lock"] != "symlink:/run/sandbox-runner/work-order.json" || sums["absent.lock"] != "missing" || !strings.HasPrefix(sums["package.json"], "sha256:") {
		t.Errorf("digests %v: a link is keyed by its target, never followed; a missing file is named", sums)
	}
}
