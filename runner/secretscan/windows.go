package secretscan

import (
	"slices"
	"sort"
	"strings"
)

// preferSpecific is gitleaks' own filter across its two detectors: a
// generic rule's finding on the line of a specific rule's finding that
// contains its secret is dropped.
func preferSpecific(fs []Finding) []Finding {
	generic := func(f Finding) bool { return strings.Contains(strings.ToLower(f.Rule), "generic") }
	all := slices.Clone(fs)
	return slices.DeleteFunc(fs, func(f Finding) bool {
		if !generic(f) {
			return false
		}
		for _, o := range all {
			if o.Line == f.Line && o.Commit == f.Commit && o.Rule != f.Rule && !generic(o) && strings.Contains(o.secret, f.secret) {
				return true
			}
		}
		return false
	})
}

// window is a byte range of a fragment starting at its line'th line (0-based).
type window struct{ from, to, line int }

// windows are the ranges of raw made of each line holding one of keys (in
// any case) and the windowLines lines after it, merged where they touch.
func windows(raw string, keys []string) []window {
	lower := strings.ToLower(raw)
	var starts []int // byte offset of each line
	hit := map[int]bool{}
	starts = append(starts, 0)
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\n' && i+1 < len(raw) {
			starts = append(starts, i+1)
		}
	}
	lineOf := func(off int) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
	}
	for _, k := range keys {
		for off := 0; ; {
			i := strings.Index(lower[off:], k)
			if i < 0 {
				break
			}
			l := lineOf(off + i)
			hit[l] = true
			off = starts[l] + 1
			if l+1 < len(starts) {
				off = starts[l+1]
			} else {
				break
			}
		}
	}
	if len(hit) == 0 {
		return nil
	}
	var out []window
	for l := 0; l < len(starts); l++ {
		if !hit[l] {
			continue
		}
		end := min(l+windowLines, len(starts)-1)
		for m := l + 1; m <= end; m++ {
			if hit[m] {
				end = min(m+windowLines, len(starts)-1)
			}
		}
		to := len(raw)
		if end+1 < len(starts) {
			to = starts[end+1]
		}
		out = append(out, window{from: starts[l], to: to, line: l})
		l = end
	}
	return out
}
