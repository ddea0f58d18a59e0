package sandboxinit

// The inner daemon's bridge. The sandbox reaches the host by the names the
// backend adds to /etc/hosts (host.docker.internal as host-gateway: the
// engine's default bridge address, 172.17.0.1 usually). On the docker
// backend the sandbox sits on a bridge of its own, another subnet, so
// that address is no longer on the sandbox's link, and an inner dockerd
// gives its own default bridge 172.17.0.0/16 regardless (dockerd 20.10
// does even with a host route to the address in place; measured): from
// then on the host's address is a local one and the runner's push to the
// git remote there is refused. When an address of /etc/hosts reached
// through the sandbox's gateway falls in the subnet dockerd would take,
// the init gives dockerd a bridge address (--bip) clear of those
// addresses and of the sandbox's own network.

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// innerBridgeDefault is the subnet dockerd gives its default bridge
// unless told otherwise.
var innerBridgeDefault = netip.MustParsePrefix("172.17.0.0/16")

// innerBridgeIP is the --bip the inner dockerd needs, "" when its default
// is clear of every address of hosts (an /etc/hosts) the sandbox reaches
// through a gateway, and of that gateway.
func innerBridgeIP(ctx context.Context, run ipTables, hosts string) (string, error) {
	var avoid []netip.Addr
	clash := false
	seen := map[netip.Addr]bool{}
	sc := bufio.NewScanner(strings.NewReader(hosts))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || !a.Is4() || a.IsLoopback() || a.IsLinkLocalUnicast() || seen[a] {
			continue
		}
		seen[a] = true
		out, err := run(ctx, "ip", "", "-4", "route", "get", a.String())
		if err != nil {
			return "", fmt.Errorf("ip route get %s: %w: %s", a, err, strings.TrimSpace(string(out)))
		}
		via, err := netip.ParseAddr(routeField(string(out), "via"))
		if err != nil {
			continue // on the sandbox's own link: dockerd sees that subnet
		}
		avoid = append(avoid, a, via)
		clash = clash || innerBridgeDefault.Contains(a)
	}
	if err := sc.Err(); err != nil || !clash {
		return "", err
	}
	// 172.18–31 as dockerd's own pools, then 10.213–255.
	var candidates []netip.Prefix
	for n := 18; n <= 31; n++ {
		candidates = append(candidates, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(n), 0, 0}), 16))
	}
	for n := 213; n <= 255; n++ {
		candidates = append(candidates, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 16))
	}
next:
	for _, p := range candidates {
		for _, a := range avoid {
			if p.Contains(a) {
				continue next
			}
		}
		b := p.Addr().As4()
		b[3] = 1
		return netip.PrefixFrom(netip.AddrFrom4(b), 16).String(), nil
	}
	return "", fmt.Errorf("no subnet for the inner daemon's bridge clear of %v", avoid)
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
