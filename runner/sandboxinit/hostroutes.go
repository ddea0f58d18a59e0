package sandboxinit

// The inner daemon's bridge. The sandbox reaches the host by the names the
// backend adds to /etc/hosts (host.docker.internal as host-gateway: the
// engine's default bridge address, 172.17.0.1 usually). On the docker
// backend the sandbox sits on a bridge of its own, another subnet, so
// that address is no longer on the sandbox's link, and an inner dockerd
// gives its own default bridge 172.17.0.0/16 regardless (dockerd 20.10
// does even with a host route to the address in place; measured): from
// then on the host's address is a local one and the runner's push to the
// git remote there is refused. The networks dockerd makes later (the
// services' network, the agent's compose projects) come from its default
// pools, which start at 172.17.0.0/16 too once the bridge has moved
// (measured: the services' network took it). When an address of
// /etc/hosts reached through the sandbox's gateway falls in the subnet
// dockerd would take, the init gives dockerd a bridge address (--bip) and
// address pools (--default-address-pool) clear of those addresses and of
// the sandbox's gateway.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// innerBridgeDefault is the subnet dockerd gives its default bridge
// unless told otherwise.
var innerBridgeDefault = netip.MustParsePrefix("172.17.0.0/16")

// innerNets are the inner dockerd's own subnets when its defaults would
// cover an address of the host's; the zero value keeps the defaults.
type innerNets struct {
	// BridgeIP is dockerd's --bip.
	BridgeIP string
	// Pools are --default-address-pool values: two /16s cut in /24s, 512
	// networks for services and compose projects.
	Pools []string
}

// args are dockerd's flags for n.
func (n innerNets) args() []string {
	var a []string
	if n.BridgeIP != "" {
		a = append(a, "--bip", n.BridgeIP)
	}
	for _, p := range n.Pools {
		a = append(a, "--default-address-pool", "base="+p+",size=24")
	}
	return a
}

// innerNetworks are the subnets the inner dockerd needs, the zero value
// when its default is clear of every address of hosts (an /etc/hosts) the
// sandbox reaches through a gateway, and of that gateway.
func innerNetworks(ctx context.Context, run ipTables, hosts string) (innerNets, error) {
	var avoid []netip.Addr
	clash := false
	seen := map[netip.Addr]bool{}
	for _, e := range hostsEntries(hosts) {
		a := e.addr
		if !a.Is4() || a.IsLoopback() || a.IsLinkLocalUnicast() || seen[a] {
			continue
		}
		seen[a] = true
		out, err := run(ctx, "ip", "", "-4", "route", "get", a.String())
		if err != nil {
			return innerNets{}, fmt.Errorf("ip route get %s: %w: %s", a, err, strings.TrimSpace(string(out)))
		}
		via, err := netip.ParseAddr(routeField(string(out), "via"))
		if err != nil {
			continue // on the sandbox's own link: dockerd sees that subnet
		}
		avoid = append(avoid, a, via)
		clash = clash || innerBridgeDefault.Contains(a)
	}
	if !clash {
		return innerNets{}, nil
	}
	// 172.18–31 as dockerd's own pools, then 10.213–255.
	var candidates []netip.Prefix
	for n := 18; n <= 31; n++ {
		candidates = append(candidates, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(n), 0, 0}), 16))
	}
	for n := 213; n <= 255; n++ {
		candidates = append(candidates, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 16))
	}
	var clear []netip.Prefix
next:
	for _, p := range candidates {
		for _, a := range avoid {
			if p.Contains(a) {
				continue next
			}
		}
		clear = append(clear, p)
	}
	if len(clear) < 3 {
		return innerNets{}, fmt.Errorf("no three subnets for the inner daemon's networks clear of %v", avoid)
	}
	b := clear[0].Addr().As4()
	b[3] = 1
	return innerNets{
		BridgeIP: netip.PrefixFrom(netip.AddrFrom4(b), 16).String(),
		Pools:    []string{clear[1].String(), clear[2].String()},
	}, nil
}

// routeField is the word after key in `ip route get`'s answer.
func routeField(route, key string) string {
	f := strings.Fields(route)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == key {
			return f[i+1]
		}
	}
	return ""
}
