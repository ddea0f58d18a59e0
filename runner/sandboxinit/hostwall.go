package sandboxinit

// The host wall's part only the sandbox sees: the addresses its host has
// from inside (its default routes' gateways, host.docker.internal in
// /etc/hosts), denied when the backend asks (dispatch.EnvDenyHost), and
// the host ports excepted from every deny (dispatch.EnvAllowHosts),
// resolved here since host.docker.internal is a name of this sandbox's
// /etc/hosts.

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// hostView is what the init reads of its host: /etc/hosts and the
// gateways of its default routes.
type hostView struct {
	hosts    string
	gateways []netip.Addr
}

// readHostView reads the sandbox's own view (Linux's /proc files).
func readHostView() hostView {
	hosts, _ := os.ReadFile("/etc/hosts")
	route4, _ := os.ReadFile("/proc/net/route")
	route6, _ := os.ReadFile("/proc/net/ipv6_route")
	return hostView{hosts: string(hosts), gateways: append(defaultGateways4(string(route4)), defaultGateways6(string(route6))...)}
}

// namedAddrs are the addresses /etc/hosts gives name.
func (v hostView) namedAddrs(name string) []netip.Addr {
	var out []netip.Addr
	for _, e := range hostsEntries(v.hosts) {
		for _, n := range e.names {
			if strings.EqualFold(n, name) {
				out = append(out, e.addr.Unmap())
			}
		}
	}
	return out
}

// hostsEntry is one line of an /etc/hosts: an address and its names.
type hostsEntry struct {
	addr  netip.Addr
	names []string
}

// hostsEntries reads an /etc/hosts: comments cut, lines without an
// address and a name skipped.
func hostsEntries(hosts string) []hostsEntry {
	var out []hostsEntry
	for _, l := range strings.Split(hosts, "\n") {
		line, _, _ := strings.Cut(l, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if a, err := netip.ParseAddr(f[0]); err == nil {
			out = append(out, hostsEntry{addr: a, names: f[1:]})
		}
	}
	return out
}

// defaultGateways4 reads /proc/net/route: the gateway of each default
// route (destination and mask 0), little-endian hex.
func defaultGateways4(table string) []netip.Addr {
	var out []netip.Addr
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 4 {
			continue
		}
		if a := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}); !a.IsUnspecified() {
			out = append(out, a)
		}
	}
	return out
}

// defaultGateways6 reads /proc/net/ipv6_route: the next hop of each
// default route (::/0).
func defaultGateways6(table string) []netip.Addr {
	var out []netip.Addr
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) < 10 || f[0] != strings.Repeat("0", 32) || f[1] != "00" {
			continue
		}
		b, err := hex.DecodeString(f[4])
		if err != nil || len(b) != 16 {
			continue
		}
		if a := netip.AddrFrom16([16]byte(b)); !a.IsUnspecified() {
			out = append(out, a)
		}
	}
	return out
}

// denyFence is what the deny chain holds: exceptions first, then denies.
type denyFence struct {
	allow []dispatch.DenyNet // one address and port each
	deny  []dispatch.DenyNet
}

// fenceFromEnv is the default deny list, the backend's, the host's own
// addresses when asked, and the host ports excepted.
func fenceFromEnv(getenv func(string) string, v hostView) (denyFence, error) {
	deny, err := denyNetsFromEnv(getenv)
	if err != nil {
		return denyFence{}, err
	}
	// A loopback entry (a Nomad node that calls itself 127.0.0.1) would
	// be the sandbox's own loopback, its services' addresses: never the host.
	f := denyFence{}
	for _, d := range deny {
		if !d.Prefix.Addr().IsLoopback() {
			f.deny = append(f.deny, d)
		}
	}
	if getenv(dispatch.EnvDenyHost) == "1" {
		host := append(append([]netip.Addr(nil), v.gateways...), v.namedAddrs(dispatch.HostGatewayName)...)
		for _, a := range host {
			if a.IsLoopback() {
				continue // the sandbox's own loopback, not the host's
			}
			f.deny = append(f.deny, dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen())})
		}
	}
	allow, err := dispatch.ParseHostAllow(getenv(dispatch.EnvAllowHosts))
	if err != nil {
		return denyFence{}, fmt.Errorf("%s: %w", dispatch.EnvAllowHosts, err)
	}
	for _, h := range allow {
		addrs := []netip.Addr{h.Addr}
		switch {
		case h.Name == dispatch.HostGatewayName:
			if addrs = v.namedAddrs(h.Name); len(addrs) == 0 {
				return denyFence{}, fmt.Errorf("%s: %s: /etc/hosts has no %s", dispatch.EnvAllowHosts, h, h.Name)
			}
		case h.Name != "":
			return denyFence{}, fmt.Errorf("%s: %s: not interpolated (Nomad fills ${...} in before the sandbox starts; elsewhere write the address)", dispatch.EnvAllowHosts, h)
		}
		for _, a := range addrs {
			f.allow = append(f.allow, dispatch.DenyNet{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: h.Port})
		}
	}
	return f, nil
}

// allowRules are the exceptions' RETURNs, for one address family.
func allowRules(allow []dispatch.DenyNet, v6 bool) [][]string {
	var rules [][]string
	for _, n := range allow {
		if n.Prefix.Addr().Is6() != v6 {
			continue
		}
		d, port := n.Prefix.String(), fmt.Sprint(n.Port)
		rules = append(rules,
			[]string{"-A", chainDeny, "-d", d, "-p", "tcp", "--dport", port, "-j", "RETURN"},
			[]string{"-A", chainDeny, "-d", d, "-p", "udp", "--dport", port, "-j", "RETURN"})
	}
	return rules
}
