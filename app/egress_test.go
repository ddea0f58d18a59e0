package app

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestNomadDenyNets(t *testing.T) {
	t.Parallel()
	c := &Config{Listen: "10.0.0.9:8080", DenyNetworks: []string{"192.168.7.0/24"}}
	c.Nomad.Addr = "https://10.0.0.5:4646"
	got := dispatch.FormatDenyNets(nomadDenyNets(context.Background(), c, zerolog.Nop()))
	if want := "192.168.7.0/24,10.0.0.5/32:4646,10.0.0.9/32:8080"; got != want {
		t.Errorf("deny nets = %q, want %q", got, want)
	}
	// ":8080" names no address (the bot's node is not a sandbox node by
	// default); loopback is the container's own.
	c = &Config{Listen: ":8080"}
	c.Nomad.Addr = "http://127.0.0.1:4646"
	if got := nomadDenyNets(context.Background(), c, zerolog.Nop()); len(got) != 0 {
		t.Errorf("deny nets = %v, want none", got)
	}
}

func TestEgressSettingsAreValidated(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"SANDBOX_DENY_NETWORKS": "SANDBOX_DENY_NETWORKS:",
		"SANDBOX_CACHE_SCOPE":   "SANDBOX_CACHE_SCOPE: cache scope \"bogus\"",
		"SANDBOX_HOST_ALLOW":    `SANDBOX_HOST_ALLOW: entry "bogus": no port`,
	} {
		vars := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": testKey, env: "bogus"}
		_, err := LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s=bogus: %v, want an error starting %q", env, err, want)
		}
	}
	vars := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": testKey,
		"SANDBOX_DENY_NETWORKS": "10.0.0.0/8, 10.1.2.3:5432", "SANDBOX_CACHE_SCOPE": "installation",
		"SANDBOX_HOST_ALLOW": "10.0.0.1:3000, host.docker.internal:8443"}
	c, err := LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if got := dispatch.FormatDenyNets(c.denyNets()); got != "10.0.0.0/8,10.1.2.3/32:5432" || c.CacheScope != "installation" {
		t.Errorf("read %q and scope %q", got, c.CacheScope)
	}
	if hs, err := c.hostAllow(); err != nil || dispatch.FormatHostAllow(hs) != "10.0.0.1:3000,host.docker.internal:8443" {
		t.Errorf("SANDBOX_HOST_ALLOW read as %v (%v)", hs, err)
	}
	// A Nomad interpolation is for Nomad's jobs alone.
	c.HostAllow = []string{"${attr.unique.network.ip-address}:3000"}
	if _, err := c.hostAllow(); err == nil || !strings.Contains(err.Error(), "only the nomad backend") {
		t.Errorf("an interpolation on the %s backend: %v", c.Backend, err)
	}
	c.Backend = "nomad"
	if _, err := c.hostAllow(); err != nil {
		t.Errorf("an interpolation on the nomad backend: %v", err)
	}
}

// TestEngineOverTCPIsFencedOff: a bot that reaches the Docker engine over
// TCP fences sandboxes off that port on every address of the host.
func TestEngineOverTCPIsFencedOff(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"tcp://127.0.0.1:2375": ":2375", "tcp://docker.internal:2376": ":2376",
		"unix:///var/run/docker.sock": "", "": "", "ssh://me@host": "",
	} {
		if got := engineListener(in); got != want {
			t.Errorf("DOCKER_HOST=%q: %q, want %q", in, got, want)
		}
	}
}
