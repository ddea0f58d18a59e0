package depscan_test

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/depscan"
)

func parse(t *testing.T, path, content string) depscan.Deps {
	t.Helper()
	d, err := depscan.Parse(path, []byte(content))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

func changes(cs []dispatch.DependencyChange) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Change+" "+c.Name+" "+c.From+"→"+c.To)
	}
	return strings.Join(out, "; ")
}

// Each ecosystem's manifest, before and after: what was added, removed or
// changed, with versions.
func TestDiffPerEcosystem(t *testing.T) {
	for _, tc := range []struct {
		path, base, head, want string
	}{
		{"go.mod", "module x\n\ngo 1.22\n\nrequire (\n\tgithub.com/a/b v1.0.0\n\tgithub.com/old/gone v0.1.0\n)\n",
			"module x\n\ngo 1.22\n\nrequire (\n\tgithub.com/a/b v1.2.0\n\tgithub.com/new/dep v0.3.1 // indirect\n)\n",
			"changed github.com/a/b v1.0.0→v1.2.0; added github.com/new/dep →v0.3.1; removed github.com/old/gone v0.1.0→"},
		{"web/package-lock.json", `{"lockfileVersion":3,"packages":{"":{"name":"web"},"node_modules/lodash":{"version":"4.17.20"}}}`,
			`{"lockfileVersion":3,"packages":{"":{"name":"web"},"node_modules/lodash":{"version":"4.17.20"},"node_modules/left-pad":{"version":"1.3.0"},"node_modules/a/node_modules/lodash":{"version":"4.17.21"}}}`,
			"added left-pad →1.3.0; changed lodash 4.17.20→4.17.20, 4.17.21"},
		{"package-lock.json", `{"lockfileVersion":1,"dependencies":{"x":{"version":"1.0.0"}}}`, `{"lockfileVersion":1,"dependencies":{"x":{"version":"1.0.1","dependencies":{"y":{"version":"2.0.0"}}}}}`,
			"changed x 1.0.0→1.0.1; added y →2.0.0"},
		{"requirements-dev.txt", "# tools\nDjango==4.2.0\nrequests>=2\n-r base.txt\n", "django==4.2.1\nrequests>=2\nPyYAML[libyaml]==6.0.1 ; python_version>'3'\n",
			"changed django 4.2.0→4.2.1; added pyyaml →6.0.1"},
		{"pyproject.toml", "[project]\nname='x'\ndependencies=['flask==2.0.0']\n",
			"[project]\nname='x'\ndependencies=['flask==3.0.0']\n[project.optional-dependencies]\ntest=['pytest>=8']\n[tool.poetry.dependencies]\npython='^3.11'\nhttpx={version='0.27.0'}\n",
			"changed flask 2.0.0→3.0.0; added httpx →0.27.0; added pytest →>=8"},
		{"Cargo.lock", "[[package]]\nname='app'\nversion='0.1.0'\n\n[[package]]\nname='serde'\nversion='1.0.1'\nsource='registry+https://github.com/rust-lang/crates.io-index'\n",
			"[[package]]\nname='app'\nversion='0.1.0'\n\n[[package]]\nname='serde'\nversion='1.0.2'\nsource='registry+https://github.com/rust-lang/crates.io-index'\n",
			"changed serde 1.0.1→1.0.2"},
	} {
		eco := depscan.Ecosystem(tc.path)
		got := changes(depscan.Diff(eco, tc.path, parse(t, tc.path, tc.base), parse(t, tc.path, tc.head)))
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.path, got, tc.want)
		}
	}
	if _, err := depscan.Parse("package-lock.json", []byte("{not json")); err == nil {
		t.Error("a broken lock file parsed")
	}
}

// An OSV database of a JSON file and a zip: a version in a SEMVER range,
// one listed by name, one fixed, a withdrawn advisory, a PyPI name in
// another case.
func TestAdvisoriesFromAnOfflineOSVDatabase(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("npm/GHSA-left.json", `{"id":"GHSA-left-pad-0001","summary":"left-pad pads wrong","affected":[{"package":{"ecosystem":"npm","name":"left-pad"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.3.1"}]}]}]}`)
	write("npm/withdrawn.json", `{"id":"GHSA-gone","withdrawn":"2024-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"left-pad"},"versions":["1.3.0"]}]}`)
	write("README.txt", "not an advisory")
	write("Go/.keep", "")
	zf, err := os.Create(filepath.Join(dir, "Go", "all.zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	for name, content := range map[string]string{
		"GO-2024-0001.json": `{"id":"GO-2024-0001","details":"Bad parsing.\nMore.","affected":[{"package":{"ecosystem":"Go","name":"github.com/new/dep"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0.2.0"},{"fixed":"0.4.0"}]}]}]}`,
		"GO-2024-0002.json": `{"id":"GO-2024-0002","affected":[{"package":{"ecosystem":"Go","name":"github.com/new/dep"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"0.3.0"}]}]}]}`,
		"PYSEC-1.json":      `{"id":"PYSEC-1","summary":"yaml","affected":[{"package":{"ecosystem":"PyPI","name":"PyYAML"},"versions":["6.0.1"]}]}`,
	} {
		w, _ := zw.Create(name)
		w.Write([]byte(content))
	}
	zw.Close()
	zf.Close()

	db, err := depscan.Load(dir, depscan.Want{"npm": {"left-pad": nil}, "Go": {"github.com/new/dep": nil}, "PyPI": {"pyyaml": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if db.Entries != 5 {
		t.Errorf("entries read %d, want 5", db.Entries)
	}
	for _, tc := range []struct{ eco, name, version, want string }{
		{"npm", "left-pad", "1.3.0", "GHSA-left-pad-0001 fixed 1.3.1"},
		{"npm", "left-pad", "1.3.1", ""},
		{"Go", "github.com/new/dep", "v0.3.1", "GO-2024-0001 fixed 0.4.0"},
		{"Go", "github.com/new/dep", "v0.1.0", "GO-2024-0002 fixed 0.3.0"},
		{"PyPI", "pyyaml", "6.0.1", "PYSEC-1 fixed "},
	} {
		var got []string
		for _, a := range db.Advisories(tc.eco, tc.name, tc.version) {
			got = append(got, a.ID+" fixed "+a.Fixed)
		}
		if strings.Join(got, "; ") != tc.want {
			t.Errorf("%s %s@%s: %q, want %q", tc.eco, tc.name, tc.version, strings.Join(got, "; "), tc.want)
		}
	}
	if _, err := depscan.Load(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing database: %v", err)
	}
}
