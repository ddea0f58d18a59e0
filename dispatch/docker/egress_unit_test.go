package docker

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The bot's listen addresses become deny entries: a fixed address as it
// is, an unspecified one as every non-loopback address of this host (the
// docker CLI here is `true`, so no gateway is added), never loopback (a
// container's loopback is its own) and never port 0 (which would deny
// every port).
func TestDenyNetsFromBotListen(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, func(o *Options) {
		o.BotListen = []string{"10.9.9.9:7000", "127.0.0.1:9000", ":0", "nonsense", ":8080"}
		o.DenyNets = []dispatch.DenyNet{{Prefix: netip.MustParsePrefix("192.168.0.0/16")}}
	})
	got := dispatch.FormatDenyNets(b.denyNets(context.Background()))
	if !strings.HasPrefix(got, "192.168.0.0/16,10.9.9.9/32:7000") {
		t.Errorf("deny nets %q do not start with the operator's network and the fixed listener", got)
	}
	for _, a := range localAddrs() {
		if a.IsLoopback() {
			continue
		}
		if want := (dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: 8080}).String(); !strings.Contains(got, want) {
			t.Errorf("deny nets %q lack this host's %s", got, want)
		}
	}
	nonLoopback := 0
	for _, a := range localAddrs() {
		if !a.IsLoopback() {
			nonLoopback++
		}
	}
	if n := len(b.denyNets(context.Background())); n != 2+nonLoopback {
		t.Errorf("%d deny entries (%s), want 2 + %d: nothing for loopback, :0 or an unreadable address", n, got, nonLoopback)
	}
	for _, d := range b.denyNets(context.Background()) {
		if d.Prefix.Addr().IsLoopback() || (d.Port == 0 && d.Prefix.Bits() == d.Prefix.Addr().BitLen()) {
			t.Errorf("deny entry %s: loopback or a whole host", d)
		}
	}
}

// Caches are per repository (images per installation when asked), and a
// coding sandbox gets the seed images read-only; task mode gets no images.
func TestCacheMountsPerScope(t *testing.T) {
	t.Parallel()
	m := dispatch.Meta{Repo: "Acme/Calc", InstallationID: 42}
	for scope, images := range map[string]string{
		CacheScopeRepository:   "repos/acme%2Fcalc/images",
		CacheScopeInstallation: "installations/42/images",
	} {
		b := unitBackend(t, func(o *Options) { o.CacheDir = t.TempDir(); o.CacheScope = scope })
		if err := b.prepareCaches(m); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(b.cacheMounts(m, false), " ")
		for _, want := range []string{
			"source=" + filepath.Join(b.o.CacheDir, images) + ",target=/cache/images ",
			"source=" + filepath.Join(b.o.CacheDir, "images") + ",target=/cache/images-seed,readonly",
			"source=" + filepath.Join(b.o.CacheDir, "repos/acme%2Fcalc/npm") + ",target=/cache/npm ",
			"source=" + filepath.Join(b.o.CacheDir, "repos/acme%2Fcalc/go") + ",target=/cache/go ",
			"source=" + filepath.Join(b.o.CacheDir, "repos/acme%2Fcalc/pip") + ",target=/cache/pip",
		} {
			if !strings.Contains(got+" ", want) {
				t.Errorf("%s: mounts lack %q:\n%s", scope, want, got)
			}
		}
		if task := strings.Join(b.cacheMounts(m, true), " "); strings.Contains(task, "images") {
			t.Errorf("%s: task mode mounts an image cache: %s", scope, task)
		}
	}
	if _, err := ParseCacheScope("org"); err == nil {
		t.Error("an unknown cache scope is accepted")
	}
}
