package docker

// The caches sandboxes keep between runs, on the engine's host under
// Options.CacheDir (the setup cache is in setupcache.go).

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/imagecache"
)

// caches are the directories sandboxes keep between runs: each run's
// image and package caches, its repository's setup cache, and the
// operator's seed images (CacheImage).
type caches struct {
	*engine
}

// Cache scopes: who shares a cache directory.
const (
	// CacheScopeRepository gives every repository its own caches (default).
	CacheScopeRepository = "repository"
	// CacheScopeInstallation shares the image cache between the
	// repositories of one installation. Package caches stay per
	// repository whatever the scope: the agent writes them, and what one
	// repository's agent writes must never be another's input.
	CacheScopeInstallation = "installation"
)

// ParseCacheScope checks a scope name; "" is the default.
func ParseCacheScope(s string) (string, error) {
	switch s {
	case "":
		return CacheScopeRepository, nil
	case CacheScopeRepository, CacheScopeInstallation:
		return s, nil
	}
	return "", fmt.Errorf("cache scope %q is not %q or %q", s, CacheScopeRepository, CacheScopeInstallation)
}

// packageCaches are written by the agent's package managers.
var packageCaches = []string{"npm", "go", "pip"}

// seedImages is the operator's image directory (CacheImage), mounted
// read-only into every coding sandbox.
const seedImages = "images"

// scopeDir is a cache directory of the run's repository or installation.
func (b *caches) scopeDir(m dispatch.Meta, kind string) string {
	repo := "repos/" + url.PathEscape(strings.ToLower(m.Repo))
	if m.Repo == "" {
		repo = "repos/_none"
	}
	if kind == "images" && b.o.CacheScope == CacheScopeInstallation {
		return filepath.Join(b.o.CacheDir, "installations", strconv.FormatInt(m.InstallationID, 10), "images")
	}
	return filepath.Join(b.o.CacheDir, repo, kind)
}

// prepareCaches creates the run's cache directories: images owned by root
// (only the sandbox's init writes them), package caches by the sandbox user.
func (b *caches) prepareCaches(m dispatch.Meta) error {
	if b.o.CacheDir == "" {
		return nil
	}
	for _, kind := range append([]string{"images"}, packageCaches...) {
		p := b.scopeDir(m, kind)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create cache %s: %w", p, err)
		}
		if kind != "images" {
			_ = os.Chown(p, b.o.SandboxUID, b.o.SandboxGID)
		}
	}
	return nil
}

// cacheMounts binds the run's caches: its scope's image cache and package
// caches read-write, the operator's seed images read-only. Task mode has
// no inner daemon, so no images.
func (b *caches) cacheMounts(m dispatch.Meta, task bool) []string {
	if b.o.CacheDir == "" {
		return nil
	}
	var args []string
	if !task {
		args = append(args,
			"--mount", bind(b.scopeDir(m, "images"), dispatch.CacheDir+"/images", false),
			"--mount", bind(filepath.Join(b.o.CacheDir, seedImages), dispatch.CacheDir+"/images-seed", true))
	}
	for _, kind := range packageCaches {
		args = append(args, "--mount", bind(b.scopeDir(m, kind), dispatch.CacheDir+"/"+kind, false))
	}
	return args
}

// CacheImage saves an image of the host's engine into the seed image
// cache, so sandboxes load it instead of pulling it: an image a
// registry-less host built itself, or one most repositories use. The image
// ID is recorded beside it and checked by every sandbox before it loads
// the file.
func (b *caches) CacheImage(ctx context.Context, ref string) error {
	if b.o.CacheDir == "" {
		return errors.New("docker backend: no cache directory configured")
	}
	if err := imagecache.Save(ctx, b.cli.run, filepath.Join(b.o.CacheDir, seedImages), ref, ""); err != nil {
		return fmt.Errorf("docker backend: cache image %s: %w", ref, err)
	}
	return nil
}
