package sandboxinit

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/setupcache"
)

// prepareSetupCache hands the repository's setup cache directory to the
// runner (its own uid, mode 0700: the agent cannot read or write it) and
// names it in env. On Nomad the node's volume is mounted whole: the init
// bounds it, binds the repository's directory of it in place and unmounts
// the rest, so nothing in the sandbox reaches another repository's
// entries. Without a runner identity of its own (task mode, an older
// image) there is no cache: the agent could write it.
func prepareSetupCache(log zerolog.Logger, order *dispatch.WorkOrder, runner *runnerIdentity, env map[string]string) {
	if order == nil || order.Repo == "" || taskMode(order) || runner == nil {
		return
	}
	if err := narrowSetupCacheVolume(log, order.Repo); err != nil {
		log.Warn().Err(err).Msg("setup cache: the node's volume could not be narrowed to this repository; no setup cache in this run")
		return
	}
	st, err := os.Lstat(dispatch.SetupCacheMount)
	if err != nil || !st.IsDir() {
		return
	}
	if err := ownPrivately(dispatch.SetupCacheMount, runner.acct, 0o700); err != nil {
		log.Warn().Err(err).Msg("setup cache: not usable")
		return
	}
	env[dispatch.EnvSetupCacheDir] = dispatch.SetupCacheMount
}

// narrowSetupCacheVolume binds the repository's directory of the node's
// volume (Nomad) at the cache's place and unmounts the volume.
func narrowSetupCacheVolume(log zerolog.Logger, repo string) error {
	node := dispatch.SetupCacheNodeMount
	if st, err := os.Lstat(node); err != nil || !st.IsDir() {
		return nil
	}
	if v := os.Getenv(dispatch.EnvSetupCacheNodeMaxSize); v != "" {
		if max, err := humanize.ParseBytes(v); err == nil && max > 0 {
			dirs, _ := filepath.Glob(filepath.Join(node, "*"))
			if removed, _ := setupcache.Evict(dirs, int64(max)); len(removed) > 0 {
				log.Info().Int("entries", len(removed)).Msg("setup cache: least recently used entries of the node removed")
			}
		}
	}
	dir := dispatch.SetupCacheRepoDir(node, repo)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.MkdirAll(dispatch.SetupCacheMount, 0o700); err != nil {
		return err
	}
	if err := syscall.Mount(dir, dispatch.SetupCacheMount, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", dir, dispatch.SetupCacheMount, err)
	}
	if err := syscall.Unmount(node, syscall.MNT_DETACH); err != nil {
		_ = syscall.Unmount(dispatch.SetupCacheMount, syscall.MNT_DETACH)
		return fmt.Errorf("unmount %s: %w", node, err)
	}
	return nil
}
