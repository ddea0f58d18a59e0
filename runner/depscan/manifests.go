// Package depscan lists the dependencies a change adds, removes or changes
// in the manifests it can read (Go modules, npm lock files, Python
// requirements and pyproject, Cargo lock files), with versions, and finds
// known advisories for the new versions in an offline OSV database.
package depscan

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"golang.org/x/mod/modfile"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// OSV's ecosystem names.
const (
	Go    = "Go"
	NPM   = "npm"
	PyPI  = "PyPI"
	Crate = "crates.io"
)

// Deps are one manifest's dependencies: name → versions (a name may be
// locked at several versions, npm's nested ones). A version that is a
// requirement rather than a pin ("^1.2", ">=2") is kept as written.
type Deps map[string][]string

// Ecosystem names the ecosystem of a manifest path, "" for a file this
// package does not read.
func Ecosystem(p string) string {
	base := path.Base(p)
	switch {
	case base == "go.mod":
		return Go
	case base == "package-lock.json" || base == "npm-shrinkwrap.json":
		return NPM
	case base == "pyproject.toml" || (strings.HasPrefix(base, "requirements") && strings.HasSuffix(base, ".txt")):
		return PyPI
	case base == "Cargo.lock":
		return Crate
	}
	return ""
}

// Parse reads one manifest; empty content is no dependencies (the file
// was added or removed).
func Parse(p string, content []byte) (Deps, error) {
	if len(strings.TrimSpace(string(content))) == 0 {
		return Deps{}, nil
	}
	base := path.Base(p)
	switch Ecosystem(p) {
	case Go:
		return parseGoMod(p, content)
	case NPM:
		return parseNPMLock(content)
	case Crate:
		return parseCargoLock(content)
	case PyPI:
		if base == "pyproject.toml" {
			return parsePyproject(content)
		}
		return parseRequirements(content), nil
	}
	return nil, fmt.Errorf("%s: not a manifest this scan reads", p)
}

func (d Deps) add(name, version string) {
	if name == "" {
		return
	}
	if !slices.Contains(d[name], version) {
		d[name] = append(d[name], version)
		sort.Strings(d[name])
	}
}

func parseGoMod(p string, content []byte) (Deps, error) {
	f, err := modfile.ParseLax(p, content, nil)
	if err != nil {
		return nil, err
	}
	d := Deps{}
	for _, r := range f.Require {
		d.add(r.Mod.Path, r.Mod.Version)
	}
	for _, r := range f.Replace {
		// A replacement by another module version is what builds.
		if r.New.Version != "" {
			delete(d, r.Old.Path)
			d.add(r.New.Path, r.New.Version)
		}
	}
	return d, nil
}

func parseNPMLock(content []byte) (Deps, error) {
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Name    string `json:"name"`
			Link    bool   `json:"link"`
		} `json:"packages"`
		Dependencies map[string]npmV1 `json:"dependencies"`
	}
	if err := json.Unmarshal(content, &lock); err != nil {
		return nil, err
	}
	d := Deps{}
	for key, p := range lock.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if i < 0 || p.Link {
			continue // the root package, or a workspace link
		}
		name := key[i+len("node_modules/"):]
		if p.Name != "" {
			name = p.Name
		}
		d.add(name, p.Version)
	}
	if len(lock.Packages) == 0 {
		addNPMV1(d, lock.Dependencies)
	}
	return d, nil
}

type npmV1 struct {
	Version      string           `json:"version"`
	Dependencies map[string]npmV1 `json:"dependencies"`
}

func addNPMV1(d Deps, deps map[string]npmV1) {
	for name, dep := range deps {
		d.add(name, dep.Version)
		addNPMV1(d, dep.Dependencies)
	}
}

func parseCargoLock(content []byte) (Deps, error) {
	var lock struct {
		Package []struct {
			Name    string `toml:"name"`
			Version string `toml:"version"`
			Source  string `toml:"source"`
		} `toml:"package"`
	}
	if err := toml.Unmarshal(content, &lock); err != nil {
		return nil, err
	}
	d := Deps{}
	for _, p := range lock.Package {
		if p.Source != "" { // the workspace's own crates have no source
			d.add(p.Name, p.Version)
		}
	}
	return d, nil
}

var (
	pepName     = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$`)
	pepNormName = regexp.MustCompile(`[-_.]+`)
)

// normName is PEP 503's normalized name.
func normName(n string) string { return strings.ToLower(pepNormName.ReplaceAllString(n, "-")) }

// pep508 splits a requirement into its name and version: the pin of
// "==", else the specifier as written.
func pep508(req string) (string, string) {
	req, _, _ = strings.Cut(req, ";")
	req, _, _ = strings.Cut(req, "#")
	m := pepName.FindStringSubmatch(req)
	if m == nil {
		return "", ""
	}
	spec := strings.TrimSpace(m[3])
	if strings.HasPrefix(spec, "==") && !strings.ContainsAny(spec, ",*") {
		spec = strings.TrimSpace(spec[2:])
	} else if strings.HasPrefix(spec, "@") {
		spec = "" // a direct URL: no version
	}
	return normName(m[1]), spec
}

func parseRequirements(content []byte) Deps {
	d := Deps{}
	for _, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "-") {
			continue // comments, -r, -e, --index-url
		}
		d.add(pep508(line))
	}
	return d
}

func parsePyproject(content []byte) (Deps, error) {
	var doc struct {
		Project struct {
			Dependencies         []string            `toml:"dependencies"`
			OptionalDependencies map[string][]string `toml:"optional-dependencies"`
		} `toml:"project"`
		Tool struct {
			Poetry struct {
				Dependencies    map[string]any `toml:"dependencies"`
				DevDependencies map[string]any `toml:"dev-dependencies"`
			} `toml:"poetry"`
		} `toml:"tool"`
	}
	if err := toml.Unmarshal(content, &doc); err != nil {
		return nil, err
	}
	d := Deps{}
	reqs := slices.Clone(doc.Project.Dependencies)
	for _, group := range doc.Project.OptionalDependencies {
		reqs = append(reqs, group...)
	}
	for _, r := range reqs {
		d.add(pep508(r))
	}
	for _, m := range []map[string]any{doc.Tool.Poetry.Dependencies, doc.Tool.Poetry.DevDependencies} {
		for name, v := range m {
			if strings.EqualFold(name, "python") {
				continue
			}
			switch v := v.(type) {
			case string:
				d.add(normName(name), v)
			case map[string]any:
				s, _ := v["version"].(string)
				d.add(normName(name), s)
			}
		}
	}
	return d, nil
}

// Diff lists what changed from base to head in one manifest, by name.
func Diff(ecosystem, manifest string, base, head Deps) []dispatch.DependencyChange {
	var out []dispatch.DependencyChange
	names := map[string]bool{}
	for n := range base {
		names[n] = true
	}
	for n := range head {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		from, to := strings.Join(base[n], ", "), strings.Join(head[n], ", ")
		c := dispatch.DependencyChange{Ecosystem: ecosystem, Name: n, From: from, To: to, Manifest: manifest}
		switch {
		case base[n] == nil:
			c.Change = dispatch.DepAdded
		case head[n] == nil:
			c.Change = dispatch.DepRemoved
		case from != to:
			c.Change = dispatch.DepChanged
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// NewVersions are the exact versions a change brings in: those of head
// that base did not have for the name.
func NewVersions(base, head Deps) map[string][]string {
	out := map[string][]string{}
	for n, vs := range head {
		for _, v := range vs {
			if !slices.Contains(base[n], v) && exact(v) {
				out[n] = append(out[n], v)
			}
		}
	}
	return out
}

// exact tells a pinned version from a requirement.
func exact(v string) bool {
	return v != "" && !strings.ContainsAny(v, "^~<>=*, |")
}
