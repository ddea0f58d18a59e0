package app

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// SetupCacheConfig bounds the setup cache (what lifecycle.setup produced,
// kept per repository; see dispatch/setupcache): sizes as "2GiB" or a
// number of bytes, "off" for no cache.
type SetupCacheConfig struct {
	// MaxRepoSize bounds one repository's entries (SANDBOX_SETUP_CACHE_MAX_SIZE).
	MaxRepoSize string `yaml:"max_repo_size"`
	// MaxNodeSize bounds all repositories' entries on one node
	// (SANDBOX_SETUP_CACHE_NODE_MAX_SIZE); least recently used go first.
	MaxNodeSize string `yaml:"max_node_size"`
	// NomadVolume is the Nomad host volume that holds the cache on each
	// sandbox node (SANDBOX_NOMAD_SETUP_CACHE_VOLUME), declared in the
	// client configuration (deploy/nomad/client.hcl); empty, Nomad runs
	// have no setup cache.
	NomadVolume string `yaml:"nomad_volume"`

	repoBytes, nodeBytes int64
}

// Default bounds of the setup cache.
const (
	DefaultSetupCacheRepoSize = "2GiB"
	DefaultSetupCacheNodeSize = "20GiB"
)

func (s *SetupCacheConfig) load(getenv Getenv) error {
	for _, e := range []struct {
		key string
		dst *string
	}{{"SANDBOX_SETUP_CACHE_MAX_SIZE", &s.MaxRepoSize}, {"SANDBOX_SETUP_CACHE_NODE_MAX_SIZE", &s.MaxNodeSize}, {"SANDBOX_NOMAD_SETUP_CACHE_VOLUME", &s.NomadVolume}} {
		if v, ok := getenv(e.key); ok {
			*e.dst = strings.TrimSpace(v)
		}
	}
	for _, e := range []struct {
		name, value, def string
		dst              *int64
	}{
		{"setup_cache.max_repo_size (SANDBOX_SETUP_CACHE_MAX_SIZE)", s.MaxRepoSize, DefaultSetupCacheRepoSize, &s.repoBytes},
		{"setup_cache.max_node_size (SANDBOX_SETUP_CACHE_NODE_MAX_SIZE)", s.MaxNodeSize, DefaultSetupCacheNodeSize, &s.nodeBytes},
	} {
		v := e.value
		if v == "" {
			v = e.def
		}
		if v == "off" {
			*e.dst = -1
			continue
		}
		n, err := humanize.ParseBytes(v)
		if err != nil || n == 0 || n > 1<<50 {
			return fmt.Errorf("%s: %q is not a size such as 2GiB, or off", e.name, v)
		}
		*e.dst = int64(n)
	}
	return nil
}

// RepoBytes bounds one repository's setup cache; -1 turns the cache off.
func (s SetupCacheConfig) RepoBytes() int64 { return s.repoBytes }

// NodeBytes bounds a node's setup caches; -1 is no node bound.
func (s SetupCacheConfig) NodeBytes() int64 { return s.nodeBytes }
