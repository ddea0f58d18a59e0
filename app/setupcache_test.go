package app_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app"
)

// The setup cache's bounds: defaults, the file, the environment over the
// file, "off", and one clear line for a bad value.
func TestSetupCacheSettings(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c.SetupCache.RepoBytes() != 2<<30 || c.SetupCache.NodeBytes() != 20<<30 || c.SetupCache.NomadVolume != "" {
		t.Errorf("defaults %d, %d, %q; want 2 GiB, 20 GiB and no Nomad volume", c.SetupCache.RepoBytes(), c.SetupCache.NodeBytes(), c.SetupCache.NomadVolume)
	}
	file := writeServerConfig(t, "setup_cache:\n  max_repo_size: 512MiB\n  max_node_size: 4GiB\n  nomad_volume: sandbox-setup-cache\n")
	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": file, "SANDBOX_SETUP_CACHE_NODE_MAX_SIZE": "off"})))
	if err != nil {
		t.Fatal(err)
	}
	if c.SetupCache.RepoBytes() != 512<<20 || c.SetupCache.NodeBytes() != -1 || c.SetupCache.NomadVolume != "sandbox-setup-cache" {
		t.Errorf("got %d, %d, %q", c.SetupCache.RepoBytes(), c.SetupCache.NodeBytes(), c.SetupCache.NomadVolume)
	}
	for _, env := range []string{"SANDBOX_SETUP_CACHE_MAX_SIZE", "SANDBOX_SETUP_CACHE_NODE_MAX_SIZE"} {
		for _, bad := range []string{"lots", "0", "-3GiB"} {
			_, err := app.LoadConfig(lookup(appEnv(map[string]string{env: bad})))
			if err == nil || !strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s=%s: %v; want one line naming %s", env, bad, err, env)
			}
		}
	}
}
