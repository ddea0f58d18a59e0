package setupcache

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// noFollow keeps openRegular from following a link planted as an entry.
const noFollow = syscall.O_NOFOLLOW

// staleTmp is how old a temporary file of a save must be before a sweep
// takes it for the leftover of a killed sandbox.
const staleTmp = time.Hour

type entryInfo struct {
	dir, key string
	size     int64
	used     time.Time
}

// Evict bounds the entries in dirs (each a repository's cache directory)
// to maxBytes in all, removing the least recently used entries first. It
// also removes what no complete entry owns: archives without a manifest
// and temporary files of saves older than an hour. It returns the keys it
// removed. Hosts call it on every repository's directory to bound the
// node; the runner on its own repository's.
func Evict(dirs []string, maxBytes int64) ([]string, error) {
	var entries []entryInfo
	var total int64
	for _, dir := range dirs {
		es := scan(dir)
		for _, e := range es {
			total += e.size
		}
		entries = append(entries, es...)
	}
	if maxBytes <= 0 || total <= maxBytes {
		return nil, nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].used.Before(entries[j].used) })
	var removed []string
	for _, e := range entries {
		if total <= maxBytes {
			break
		}
		(&Store{Dir: e.dir}).remove(e.key)
		total -= e.size
		removed = append(removed, e.key)
	}
	return removed, nil
}

// scan lists dir's complete entries and sweeps what belongs to none.
func scan(dir string) []entryInfo {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	manifests := map[string]time.Time{}
	archives := map[string]int64{}
	for _, de := range des {
		name := de.Name()
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasPrefix(name, dispatch.CacheTmpPrefix):
			if time.Since(info.ModTime()) > staleTmp {
				_ = os.Remove(filepath.Join(dir, name))
			}
		case strings.HasSuffix(name, manifestSuffix):
			manifests[strings.TrimSuffix(name, manifestSuffix)] = info.ModTime()
		case strings.HasSuffix(name, archiveSuffix):
			archives[strings.TrimSuffix(name, archiveSuffix)] = info.Size()
		}
	}
	var out []entryInfo
	for key, size := range archives {
		used, ok := manifests[key]
		if !ok {
			// An archive whose manifest never came (a killed save) is
			// no entry; a fresh one may be a save in progress.
			if st, err := os.Stat(filepath.Join(dir, key+archiveSuffix)); err == nil && time.Since(st.ModTime()) > staleTmp {
				_ = os.Remove(filepath.Join(dir, key+archiveSuffix))
			}
			continue
		}
		out = append(out, entryInfo{dir: dir, key: key, size: size, used: used})
	}
	return out
}

// DirSize is what the complete entries in dir hold, in bytes.
func DirSize(dir string) int64 {
	var n int64
	for _, e := range scan(dir) {
		n += e.size
	}
	return n
}
