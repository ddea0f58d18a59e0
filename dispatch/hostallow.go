package dispatch

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The host wall: no sandbox reaches the machine it runs on (the engine's
// bridge gateway, host.docker.internal, the host's other addresses, a
// Nomad node's own address with its client API and Consul agent) except
// the host ports the operator lists and those the bot opens for the run.
// The backend denies the host's addresses it knows (EnvDenyNets) and asks
// the init to deny what only the sandbox sees (EnvDenyHost: its gateways,
// host.docker.internal); the exceptions (EnvAllowHosts) come first in the
// init's chain, so they hold against every deny.

// HostGatewayName is the name a sandbox reaches its host by (the docker
// backend adds it as host-gateway); a HostAllow may use it for the
// address, which the init reads from its /etc/hosts.
const HostGatewayName = "host.docker.internal"

// HostAllow is one host port a sandbox may reach through the wall: an IP
// address, or HostGatewayName, and a TCP/UDP port.
type HostAllow struct {
	// Addr is the address; invalid when Name is set.
	Addr netip.Addr
	// Name is HostGatewayName, or a Nomad interpolation
	// (${attr.unique.network.ip-address}) the client fills in before the
	// sandbox starts.
	Name string
	Port uint16
}

// String is the entry's form in SANDBOX_HOST_ALLOW and EnvAllowHosts:
// "10.0.0.1:3000", "[fd00::1]:8443", "host.docker.internal:8443".
func (h HostAllow) String() string {
	p := strconv.Itoa(int(h.Port))
	switch {
	case h.Name != "":
		return h.Name + ":" + p
	case h.Addr.Is6():
		return "[" + h.Addr.String() + "]:" + p
	}
	return h.Addr.String() + ":" + p
}

// ParseHostAllow reads SANDBOX_HOST_ALLOW's syntax: comma-separated
// host:port entries whose host is an IPv4 address, an IPv6 address in
// brackets, host.docker.internal, or a Nomad ${...} interpolation; a port
// is always given (1-65535): the wall opens ports, never a whole host.
// The error names the bad entry.
func ParseHostAllow(s string) ([]HostAllow, error) {
	var out []HostAllow
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		h, err := parseHostAllow(f)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w (want host:port, e.g. 10.0.0.1:3000, [fd00::1]:3000 or %s:8443)", f, err, HostGatewayName)
		}
		out = append(out, h)
	}
	return out, nil
}

func parseHostAllow(f string) (HostAllow, error) {
	i := strings.LastIndex(f, ":")
	if i < 0 {
		return HostAllow{}, fmt.Errorf("no port")
	}
	host, portText := f[:i], f[i+1:]
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return HostAllow{}, fmt.Errorf("port %q is not between 1 and 65535", portText)
	}
	h := HostAllow{Port: uint16(port)}
	switch {
	case strings.EqualFold(host, HostGatewayName):
		h.Name = HostGatewayName
	case strings.HasPrefix(host, "${") && strings.HasSuffix(host, "}") && !strings.ContainsAny(host[2:len(host)-1], "${},: "):
		h.Name = host
	case strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]"):
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return HostAllow{}, fmt.Errorf("%q is not an IPv6 address", host)
		}
		h.Addr = a
	default:
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			if err == nil || strings.Contains(host, ":") {
				return HostAllow{}, fmt.Errorf("%q: an IPv6 address goes in brackets", host)
			}
			return HostAllow{}, fmt.Errorf("%q is not an IPv4 address, [IPv6] or %s (names other than that are not resolved: the wall is by address)", host, HostGatewayName)
		}
		h.Addr = a
	}
	if h.Name == "" && (h.Addr.IsUnspecified() || h.Addr.IsMulticast()) {
		return HostAllow{}, fmt.Errorf("%s is not one host's address", h.Addr)
	}
	return h, nil
}

// FormatHostAllow is ParseHostAllow's inverse, without duplicates.
func FormatHostAllow(hs []HostAllow) string {
	seen := map[string]bool{}
	var parts []string
	for _, h := range hs {
		if s := h.String(); !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ",")
}
