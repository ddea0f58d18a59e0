package sandboxcfg

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Cache is the setup cache of the repository (.sandbox.yml `cache:`). The
// runner saves what lifecycle.setup produced in Paths, keyed by the setup
// commands and the digests of KeyFiles (the lock files by default), after
// setup on the base branch's own commit and before the agent runs; a later
// run whose key matches restores it and skips setup.
type Cache struct {
	Enabled  *bool    `yaml:"enabled,omitempty" json:"enabled,omitempty" desc:"Use the setup cache when lifecycle.setup is set. Default true."`
	Paths    []string `yaml:"paths,omitempty" json:"paths,omitempty" desc:"Paths in the repository that setup produces and the cache keeps, e.g. node_modules or .venv. Default: by the lock files at the top of the repository (node_modules for npm, yarn, pnpm and bun; .venv for uv, Poetry, Pipenv and requirements.txt; vendor/bundle for Bundler; vendor for Composer)."`
	KeyFiles []string `yaml:"key_files,omitempty" json:"key_files,omitempty" desc:"Files whose content decides what setup produces, added to the key besides the setup commands and the default lock files."`
}

// ResolvedCache is Cache with its default applied (Resolved).
type ResolvedCache struct {
	Enabled  bool     `json:"enabled"`
	Paths    []string `json:"paths,omitempty"`
	KeyFiles []string `json:"key_files,omitempty"`
}

// On reports whether the cache applies to setup.
func (c ResolvedCache) On() bool { return c.Enabled }

func (c Cache) resolve() ResolvedCache {
	return ResolvedCache{Enabled: c.On(), Paths: slices.Clone(c.Paths), KeyFiles: slices.Clone(c.KeyFiles)}
}

// layer is c as a layer that sets everything.
func (c ResolvedCache) layer() Cache {
	enabled := c.Enabled
	return Cache{Enabled: &enabled, Paths: c.Paths, KeyFiles: c.KeyFiles}
}

// maxCacheEntries bounds paths and key_files.
const maxCacheEntries = 32

// On reports whether the cache applies to setup (default true).
func (c Cache) On() bool { return c.Enabled == nil || *c.Enabled }

func (c Cache) set() bool { return c.Enabled != nil || len(c.Paths) > 0 || len(c.KeyFiles) > 0 }

// merge applies a higher layer's keys over c, key by key.
func (c *Cache) merge(over Cache) {
	if over.Enabled != nil {
		c.Enabled = over.Enabled
	}
	if len(over.Paths) > 0 {
		c.Paths = slices.Clone(over.Paths)
	}
	if len(over.KeyFiles) > 0 {
		c.KeyFiles = slices.Clone(over.KeyFiles)
	}
}

func (c Cache) validate(bad func(field, format string, args ...any)) {
	for _, f := range []struct {
		field string
		list  []string
	}{{"cache.paths", c.Paths}, {"cache.key_files", c.KeyFiles}} {
		field, list := f.field, f.list
		if len(list) > maxCacheEntries {
			bad(field, "lists %d entries; at most %d", len(list), maxCacheEntries)
		}
		for i, p := range list {
			if err := CheckRepoPath(p); err != nil {
				bad(fmt.Sprintf("%s[%d]", field, i), "%v", err)
			}
		}
	}
}

// CheckRepoPath accepts a clean relative path inside the repository that is
// neither the whole checkout nor inside .git.
func CheckRepoPath(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("is empty")
	case strings.ContainsAny(p, "\x00\n\r\\"):
		return fmt.Errorf("%q holds a control character or a backslash", p)
	case path.IsAbs(p) || strings.HasPrefix(p, "~"):
		return fmt.Errorf("%q must be relative to the repository", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not clean; write %q", p, path.Clean(p))
	case p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q is not inside the repository", p)
	case p == ".git" || strings.HasPrefix(p, ".git/"):
		return fmt.Errorf("%q is inside .git", p)
	}
	return nil
}
