package docker

// What the docker backend tells a sandbox about its neighbours: the
// addresses its init must fence off.

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// denyNets is what the sandboxes must not reach beyond the defaults: the
// operator's networks, the host itself when the wall is up, and every
// address the bot's listeners answer on.
func (b *sandboxNetwork) denyNets(ctx context.Context) []dispatch.DenyNet {
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
func (b *sandboxNetwork) gateways(ctx context.Context) []netip.Addr {
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
