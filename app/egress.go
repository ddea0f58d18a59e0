package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
)

// validateEgress checks the sandbox network and cache settings.
func (c *Config) validateEgress() error {
	for _, s := range c.DenyNetworks {
		if _, err := dispatch.ParseDenyNet(s); err != nil {
			return fmt.Errorf("SANDBOX_DENY_NETWORKS: %w (want an address or CIDR network, optionally :port)", err)
		}
	}
	if _, err := c.hostAllow(); err != nil {
		return err
	}
	if _, err := docker.ParseCacheScope(c.CacheScope); err != nil {
		return fmt.Errorf("SANDBOX_CACHE_SCOPE: %w", err)
	}
	return nil
}

// hostAllow is SANDBOX_HOST_ALLOW, parsed.
func (c *Config) hostAllow() ([]dispatch.HostAllow, error) {
	hs, err := dispatch.ParseHostAllow(strings.Join(c.HostAllow, ","))
	if err != nil {
		return nil, fmt.Errorf("SANDBOX_HOST_ALLOW: %w", err)
	}
	for _, h := range hs {
		if strings.HasPrefix(h.Name, "${") && c.Backend != "nomad" {
			return nil, fmt.Errorf("SANDBOX_HOST_ALLOW: entry %q is a Nomad interpolation, which only the nomad backend fills in (the backend is %s): write the address", h, c.Backend)
		}
	}
	return hs, nil
}

// denyNets is the operator's list, already validated.
func (c *Config) denyNets() []dispatch.DenyNet {
	var out []dispatch.DenyNet
	for _, s := range c.DenyNetworks {
		if d, err := dispatch.ParseDenyNet(s); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// nomadDenyNets adds the Nomad API (NOMAD_ADDR's addresses and port) and
// the bot's own listen address, when it names one, to the operator's list.
// The Nomad agent on each sandbox's own node is added by the job itself.
func nomadDenyNets(ctx context.Context, c *Config, log zerolog.Logger) []dispatch.DenyNet {
	nets := c.denyNets()
	add := func(what, host string, port uint64) {
		if a, err := netip.ParseAddr(host); err == nil {
			if !a.IsUnspecified() && !a.IsLoopback() {
				nets = append(nets, dispatch.DenyNet{Prefix: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), Port: uint16(port)})
			}
			return
		}
		if host == "" {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			log.Warn().Err(err).Str(what, host).Msg("cannot resolve: sandboxes are fenced off it only by name-free rules")
			return
		}
		for _, a := range addrs {
			if a = a.Unmap(); !a.IsLoopback() {
				nets = append(nets, dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: uint16(port)})
			}
		}
	}
	if u, err := url.Parse(c.Nomad.Addr); err == nil && u.Hostname() != "" {
		port, err := strconv.ParseUint(u.Port(), 10, 16)
		if err != nil {
			port = 4646
		}
		add("nomad_addr", u.Hostname(), port)
	}
	if host, p, err := net.SplitHostPort(c.Listen); err == nil {
		if port, err := strconv.ParseUint(p, 10, 16); err == nil && port != 0 {
			add("listen", host, port)
		}
	}
	return nets
}
