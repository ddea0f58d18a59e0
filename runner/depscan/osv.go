package depscan

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxEntryBytes bounds one advisory file (OSV's largest are well under).
const maxEntryBytes = 4 << 20

// Want names the packages a lookup is for: ecosystem → name → versions.
type Want map[string]map[string][]string

// DB is what an OSV database says about the packages asked for.
type DB struct {
	// Entries is how many advisories were read.
	Entries int
	byPkg   map[string][]osvEntry // ecosystem "/" name
}

type osvEntry struct {
	ID        string `json:"id"`
	Summary   string `json:"summary"`
	Details   string `json:"details"`
	Withdrawn string `json:"withdrawn"`
	Affected  []struct {
		Package struct {
			Ecosystem string `json:"ecosystem"`
			Name      string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Type   string `json:"type"`
			Events []struct {
				Introduced   string `json:"introduced"`
				Fixed        string `json:"fixed"`
				LastAffected string `json:"last_affected"`
			} `json:"events"`
		} `json:"ranges"`
		Versions []string `json:"versions"`
	} `json:"affected"`
}

func pkgKey(eco, name string) string {
	if eco == PyPI {
		name = normName(name)
	}
	return eco + "/" + name
}

// Load reads the OSV database in dir: OSV JSON files, and zip archives of
// them (OSV's per-ecosystem all.zip export), at any depth. Only the
// advisories naming a wanted package are kept; a file that is not an
// advisory is skipped.
func Load(dir string, want Want) (*DB, error) {
	db := &DB{byPkg: map[string][]osvEntry{}}
	var names [][]byte
	for _, ns := range want {
		for n := range ns {
			names = append(names, []byte(strings.ToLower(n)))
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("OSV database %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("OSV database %s: not a directory", dir)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".json":
			b, err := readCapped(p)
			if err != nil {
				return err
			}
			db.add(b, names, want)
		case ".zip":
			return db.addZip(p, names, want)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("OSV database %s: %w", dir, err)
	}
	return db, nil
}

func readCapped(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxEntryBytes))
}

func (db *DB) addZip(p string, names [][]byte, want Want) error {
	z, err := zip.OpenReader(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer z.Close()
	for _, f := range z.File {
		if !strings.HasSuffix(strings.ToLower(f.Name), ".json") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", p, f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxEntryBytes))
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", p, f.Name, err)
		}
		db.add(b, names, want)
	}
	return nil
}

// add keeps an advisory naming a wanted package; most are passed over
// by a byte search for the names before any JSON is decoded.
func (db *DB) add(b []byte, names [][]byte, want Want) {
	hit := false
	lower := bytes.ToLower(b)
	for _, n := range names {
		if bytes.Contains(lower, n) {
			hit = true
			break
		}
	}
	db.Entries++
	if !hit {
		return
	}
	var e osvEntry
	if json.Unmarshal(b, &e) != nil || e.ID == "" || e.Withdrawn != "" {
		return
	}
	seen := map[string]bool{}
	for _, a := range e.Affected {
		k := pkgKey(a.Package.Ecosystem, a.Package.Name)
		if _, ok := want[a.Package.Ecosystem][normFor(a.Package.Ecosystem, a.Package.Name)]; ok && !seen[k] {
			seen[k] = true
			db.byPkg[k] = append(db.byPkg[k], e)
		}
	}
}

func normFor(eco, name string) string {
	if eco == PyPI {
		return normName(name)
	}
	return name
}

// Advisories are the known advisories for one package version.
func (db *DB) Advisories(eco, name, version string) []dispatch.Advisory {
	var out []dispatch.Advisory
	for _, e := range db.byPkg[pkgKey(eco, name)] {
		for _, a := range e.Affected {
			if pkgKey(a.Package.Ecosystem, a.Package.Name) != pkgKey(eco, name) {
				continue
			}
			hit, fixed := false, ""
			for _, v := range a.Versions {
				hit = hit || sameVersion(eco, v, version)
			}
			for _, r := range a.Ranges {
				if r.Type != "SEMVER" && r.Type != "ECOSYSTEM" {
					continue
				}
				events := make([]event, 0, len(r.Events))
				for _, ev := range r.Events {
					events = append(events, event{ev.Introduced, ev.Fixed, ev.LastAffected})
					if ev.Fixed != "" && compare(eco, ev.Fixed, version) > 0 && (fixed == "" || compare(eco, ev.Fixed, fixed) < 0) {
						fixed = ev.Fixed
					}
				}
				hit = hit || inRange(eco, version, events)
			}
			if hit {
				summary := e.Summary
				if summary == "" {
					summary, _, _ = strings.Cut(strings.TrimSpace(e.Details), "\n")
				}
				out = append(out, dispatch.Advisory{ID: e.ID, Ecosystem: eco, Name: name, Version: version, Summary: summary, Fixed: fixed})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

type event struct{ introduced, fixed, lastAffected string }

// inRange is OSV's evaluation of a range's events: sorted by version, an
// introduced at or below v opens it, a fixed at or below v (or a
// last_affected below v) closes it.
func inRange(eco, v string, events []event) bool {
	at := func(e event) string {
		return firstOf(e.introduced, e.fixed, e.lastAffected)
	}
	sort.SliceStable(events, func(i, j int) bool { return compare(eco, at(events[i]), at(events[j])) < 0 })
	affected := false
	for _, e := range events {
		switch {
		case e.introduced != "" && compare(eco, v, e.introduced) >= 0:
			affected = true
		case e.fixed != "" && compare(eco, v, e.fixed) >= 0:
			affected = false
		case e.lastAffected != "" && compare(eco, v, e.lastAffected) > 0:
			affected = false
		}
	}
	return affected
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func sameVersion(eco, a, b string) bool { return compare(eco, a, b) == 0 }

// compare orders two versions of eco: semantic versions for Go, npm and
// crates.io (OSV writes Go's without the "v"), release numbers then the
// rest for PyPI; "0" is below everything (OSV's "introduced": "0").
func compare(eco, a, b string) int {
	if a == b {
		return 0
	}
	if a == "0" {
		return -1
	}
	if b == "0" {
		return 1
	}
	if eco == PyPI {
		return comparePEP440(a, b)
	}
	va, vb := "v"+strings.TrimPrefix(a, "v"), "v"+strings.TrimPrefix(b, "v")
	if semver.IsValid(va) && semver.IsValid(vb) {
		return semver.Compare(va, vb)
	}
	return strings.Compare(a, b)
}

// comparePEP440 compares release segments numerically, then a final
// release above its pre-releases (1.0 > 1.0rc1), then the rest as text.
// It is not all of PEP 440 (epochs, local versions): enough to place a
// pinned version between an advisory's introduced and fixed.
func comparePEP440(a, b string) int {
	ra, resta := releaseOf(a)
	rb, restb := releaseOf(b)
	for i := 0; i < max(len(ra), len(rb)); i++ {
		x, y := at(ra, i), at(rb, i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case resta == restb:
		return 0
	case resta == "":
		if strings.HasPrefix(restb, ".post") {
			return -1
		}
		return 1
	case restb == "":
		if strings.HasPrefix(resta, ".post") {
			return 1
		}
		return -1
	}
	return strings.Compare(resta, restb)
}

func releaseOf(v string) ([]int, string) {
	v = strings.TrimPrefix(strings.ToLower(v), "v")
	var nums []int
	for v != "" {
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == 0 {
			break
		}
		n, _ := strconv.Atoi(v[:i])
		nums = append(nums, n)
		v = v[i:]
		if strings.HasPrefix(v, ".") && len(v) > 1 && v[1] >= '0' && v[1] <= '9' {
			v = v[1:]
			continue
		}
		break
	}
	return nums, v
}

func at(n []int, i int) int {
	if i < len(n) {
		return n[i]
	}
	return 0
}
