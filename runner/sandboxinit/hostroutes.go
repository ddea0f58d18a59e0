package sandboxinit

// Host routes. The sandbox reaches the host by the names the backend adds
// to /etc/hosts (host.docker.internal, host-gateway: the engine's default
// bridge address, 172.17.0.1 usually). On the docker backend the sandbox
// sits on a bridge of its own (another subnet), so that address is
// reached through the default route, and an inner daemon, which picks its
// bridges' subnets among those no route of its namespace covers, would
// take 172.17.0.0/16 for its own bridge: from then on the host's address
// is a local one and the runner's push to the git remote there is
// refused. A /32 route via the default gateway for each such address,
// before dockerd starts, keeps the inner daemon's subnets clear of them.

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// pinHostRoutes adds a host route via the default gateway for every IPv4
// address of hosts (an /etc/hosts) that the namespace reaches through a
// gateway rather than on a link of its own.
func pinHostRoutes(ctx context.Context, run ipTables, hosts string) ([]string, error) {
	var pinned []string
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
			return pinned, fmt.Errorf("ip route get %s: %w: %s", a, err, strings.TrimSpace(string(out)))
		}
		via, dev := routeField(string(out), "via"), routeField(string(out), "dev")
		if via == "" || dev == "" {
			continue // on a link of the sandbox's own: nothing to pin
		}
		if out, err := run(ctx, "ip", "", "-4", "route", "replace", a.String()+"/32", "via", via, "dev", dev); err != nil {
			return pinned, fmt.Errorf("ip route replace %s/32 via %s: %w: %s", a, via, err, strings.TrimSpace(string(out)))
		}
		pinned = append(pinned, a.String())
	}
	return pinned, sc.Err()
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
