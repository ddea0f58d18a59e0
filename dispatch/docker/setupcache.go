package docker

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/setupcache"
)

// The setup cache on this node: repos/<owner%2Fname>/setup, bound into
// that repository's coding sandboxes at dispatch.SetupCacheMount and
// written there by the runner alone (the directory is the runner's, 0700;
// the sandbox's init makes sure of it before the runner starts).

// setupCacheDir is the run's repository's setup cache directory.
func (b *caches) setupCacheDir(m dispatch.Meta) string { return b.scopeDir(m, "setup") }

// prepareSetupCache creates the run's directory and bounds the node's
// setup caches, least recently used entries first, before the run adds
// one.
func (b *caches) prepareSetupCache(m dispatch.Meta) error {
	if b.o.CacheDir == "" || b.o.SetupCacheMaxBytes < 0 {
		return nil
	}
	dir := b.setupCacheDir(m)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	_ = os.Chown(dir, dispatch.RunnerUID, dispatch.RunnerUID)
	if b.o.SetupCacheNodeMaxBytes > 0 {
		dirs, _ := filepath.Glob(filepath.Join(b.o.CacheDir, "repos", "*", "setup"))
		if removed, _ := setupcache.Evict(dirs, b.o.SetupCacheNodeMaxBytes); len(removed) > 0 {
			b.log.Info().Int("entries", len(removed)).Int64("bound_bytes", b.o.SetupCacheNodeMaxBytes).Msg("setup cache: least recently used entries removed")
		}
	}
	return nil
}

// setupCacheArgs binds the directory and bounds it for the runner.
func (b *caches) setupCacheArgs(m dispatch.Meta, task bool) []string {
	// A preview's code is the agent's: its setup is never saved, so the
	// cache is not even mounted.
	if b.o.CacheDir == "" || b.o.SetupCacheMaxBytes < 0 || task || m.Mode == dispatch.ModePreview {
		return nil
	}
	args := []string{"--mount", bind(b.setupCacheDir(m), dispatch.SetupCacheMount, false)}
	if b.o.SetupCacheMaxBytes > 0 {
		args = append(args, "--env", dispatch.EnvSetupCacheMaxSize+"="+strconv.FormatInt(b.o.SetupCacheMaxBytes, 10))
	}
	return args
}
