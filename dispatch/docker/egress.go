package docker

// What the docker backend tells a sandbox about its neighbours (the
// addresses its init must fence off) and which caches it mounts.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/imagecache"
)

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
func (b *Backend) scopeDir(m dispatch.Meta, kind string) string {
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
func (b *Backend) prepareCaches(m dispatch.Meta) error {
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
func (b *Backend) cacheMounts(m dispatch.Meta, task bool) []string {
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
func (b *Backend) CacheImage(ctx context.Context, ref string) error {
	if b.o.CacheDir == "" {
		return errors.New("docker backend: no cache directory configured")
	}
	if err := imagecache.Save(ctx, b.cli.run, filepath.Join(b.o.CacheDir, seedImages), ref, ""); err != nil {
		return fmt.Errorf("docker backend: cache image %s: %w", ref, err)
	}
	return nil
}

// denyNets is what the sandboxes must not reach beyond the defaults: the
// operator's networks, the host itself when the wall is up, and every
// address the bot's listeners answer on.
func (b *Backend) denyNets(ctx context.Context) []dispatch.DenyNet {
	nets := append([]dispatch.DenyNet(nil), b.o.DenyNets...)
	if b.o.HostWall {
		// The host: every address it has, and the sandbox network's
		// gateway (host.docker.internal, which the init adds from its
		// /etc/hosts too), every port.
		for _, a := range append(localAddrs(), b.gateways(ctx)...) {
			if a = a.Unmap(); !a.IsLoopback() {
				nets = append(nets, dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen())})
			}
		}
	}
	for _, l := range b.o.BotListen {
		host, portText, err := net.SplitHostPort(l)
		port, perr := strconv.ParseUint(portText, 10, 16)
		if err != nil || perr != nil || port == 0 {
			// Port 0 would deny every port of the host: the listener's
			// real port is not known here.
			b.log.Warn().Str("listen", l).Msg("bot listen address without a fixed port: sandboxes are not fenced off it")
			continue
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			addrs = []netip.Addr{a}
		} else if host != "" && err != nil {
			ips, _ := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			addrs = ips
		} else {
			// Every address: the host's own and the sandbox network's
			// gateway (the bot may run in a container publishing its port).
			addrs = append(localAddrs(), b.gateways(ctx)...)
		}
		for _, a := range addrs {
			if a = a.Unmap(); a.IsLoopback() {
				continue // a container's loopback is its own
			}
			nets = append(nets, dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: uint16(port)})
		}
	}
	return nets
}

func localAddrs() []netip.Addr {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && !ip.Unmap().IsLinkLocalUnicast() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// gateways are the sandbox network's gateway addresses (host-gateway).
func (b *Backend) gateways(ctx context.Context) []netip.Addr {
	network := b.network()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := b.cli.run(ctx, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}", network)
	if err != nil {
		b.log.Warn().Err(err).Str("network", network).Msg("sandbox network's gateway unknown: only the host's own addresses are fenced off")
		return nil
	}
	var gws []netip.Addr
	for _, f := range strings.Fields(out) {
		if a, err := netip.ParseAddr(f); err == nil {
			gws = append(gws, a)
		}
	}
	return gws
}
