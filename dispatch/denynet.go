package dispatch

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DenyNet is a destination no process of a sandbox, and no container of its
// inner daemon, may open a connection to: a network, or one port of it.
// The backend fills the list (the bot's listener, the Nomad API, the
// operator's extra networks) and the sandbox's init enforces it with
// iptables whatever network.allow says.
type DenyNet struct {
	Prefix netip.Prefix
	// Port limits the rule to one TCP/UDP port; 0 is every port.
	Port uint16
}

// DefaultDenyNets are denied in every sandbox: link-local addresses, where
// clouds serve instance metadata and credentials (169.254.169.254,
// AWS's IPv6 fd00:ec2::254, fe80::/10).
func DefaultDenyNets() []DenyNet {
	return []DenyNet{
		{Prefix: netip.MustParsePrefix("169.254.0.0/16")},
		{Prefix: netip.MustParsePrefix("fe80::/10")},
		{Prefix: netip.MustParsePrefix("fd00:ec2::254/128")},
	}
}

// String is the entry's form in EnvDenyNets: "10.0.0.5/32:4646",
// "169.254.0.0/16", "[fd00:ec2::254/128]:80".
func (d DenyNet) String() string {
	p := d.Prefix.String()
	if d.Port == 0 {
		return p
	}
	if d.Prefix.Addr().Is6() {
		return "[" + p + "]:" + strconv.Itoa(int(d.Port))
	}
	return p + ":" + strconv.Itoa(int(d.Port))
}

// Contains reports whether a connection to addr:port is denied by d.
func (d DenyNet) Contains(addr netip.Addr, port uint16) bool {
	return d.Prefix.Contains(addr.Unmap()) && (d.Port == 0 || d.Port == port)
}

// ParseDenyNet reads one entry: an IP address or CIDR network, optionally
// with ":port" (IPv6 in brackets when a port follows: "[fe80::1]:8080").
func ParseDenyNet(s string) (DenyNet, error) {
	s = strings.TrimSpace(s)
	net, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return DenyNet{}, fmt.Errorf("%q: no closing ]", s)
		}
		net = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return DenyNet{}, fmt.Errorf("%q: want [address]:port", s)
			}
			port = rest[1:]
		}
	case strings.Count(s, ":") == 1:
		net, port, _ = strings.Cut(s, ":")
	}
	var d DenyNet
	if strings.Contains(net, "/") {
		p, err := netip.ParsePrefix(net)
		if err != nil {
			return DenyNet{}, fmt.Errorf("%q: not an address or CIDR network: %v", s, err)
		}
		d.Prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(net)
		if err != nil {
			return DenyNet{}, fmt.Errorf("%q: not an address or CIDR network: %v", s, err)
		}
		a = a.Unmap()
		d.Prefix = netip.PrefixFrom(a, a.BitLen())
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return DenyNet{}, fmt.Errorf("%q: port %q is not between 1 and 65535", s, port)
		}
		d.Port = uint16(n)
	}
	return d, nil
}

// ParseDenyNets reads a comma-separated list (EnvDenyNets' value, or the
// operator's setting); empty items are skipped.
func ParseDenyNets(s string) ([]DenyNet, error) {
	var out []DenyNet
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		d, err := ParseDenyNet(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatDenyNets is ParseDenyNets' inverse, without duplicates.
func FormatDenyNets(ds []DenyNet) string {
	seen := map[DenyNet]bool{}
	var parts []string
	for _, d := range ds {
		if !seen[d] {
			seen[d] = true
			parts = append(parts, d.String())
		}
	}
	return strings.Join(parts, ",")
}

// PrivateAddr reports whether a is an address no public host has: loopback,
// RFC 1918, link-local, unique local (fc00::/7), CGNAT (100.64.0.0/10),
// unspecified. The egress proxy refuses to dial these unless network.allow
// lists the address explicitly, so that a name cannot be pointed (or
// rebound) at the sandbox's neighbours.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsInterfaceLocalMulticast() || cgnat.Contains(a)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")
