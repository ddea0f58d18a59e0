package sandboxcfg

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// AllowEntry is one network.allow entry: a host name, every subdomain of a
// domain ("*.example.com"), an IP address or a CIDR network, each with an
// optional port. Without a port an entry allows HTTPS (CONNECT to 443) and
// plain HTTP (80) only; "host:8443" allows that port and no other.
//
// A name never reaches a private address (RFC 1918, loopback, link-local,
// unique local, CGNAT): the proxy checks the address it actually dials, so
// DNS cannot point an allowed name at the sandbox's neighbours. Listing the
// address or its network ("10.1.2.3", "10.1.0.0/16:5000") is what allows it.
type AllowEntry struct {
	// Host is the lower-case name without the root dot; for a wildcard it
	// is the domain after "*.". Empty for an address entry.
	Host     string
	Wildcard bool
	// Prefix is the address entry's network (a single address is a /32 or
	// /128); invalid for a name entry.
	Prefix netip.Prefix
	// Port is the one port allowed; 0 means the defaults, 443 and 80.
	Port uint16
}

// Default ports of an entry that names none.
const (
	DefaultConnectPort = 443
	DefaultHTTPPort    = 80
)

var hostLabel = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)

var errAllowSyntax = errors.New("must be a host name, *.domain, an IP address or a CIDR network, optionally with :port")

// ParseAllowEntry reads one network.allow entry.
func ParseAllowEntry(s string) (AllowEntry, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(s, "://") {
		return AllowEntry{}, errors.New("must be a host, not a URL (write example.com, or example.com:8443 for a port other than 443)")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return AllowEntry{}, errAllowSyntax
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return AllowEntry{}, errAllowSyntax
			}
			port = rest[1:]
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return AllowEntry{}, errors.New("a port after : is missing")
		}
	}
	var e AllowEntry
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return AllowEntry{}, fmt.Errorf("port %q is not a number between 1 and 65535", port)
		}
		e.Port = uint16(n)
	}
	if p, err := netip.ParsePrefix(host); err == nil {
		e.Prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		e.Prefix = netip.PrefixFrom(a, a.BitLen())
		return e, nil
	}
	host = strings.TrimSuffix(host, ".")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		e.Wildcard = true
		host = rest
	}
	if host == "" || len(host) > 253 {
		return AllowEntry{}, errAllowSyntax
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return AllowEntry{}, errAllowSyntax
		}
	}
	// A name whose last label is all digits is an address in disguise
	// ("10.0.0.1.", "10.1"): resolvers read it as one, so it would slip a
	// private address past the rule that only an address entry allows one.
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return AllowEntry{}, fmt.Errorf("%q looks like an IP address but is not one (write the address without a trailing dot, or a CIDR network)", s)
	}
	e.Host = host
	return e, nil
}

// IsAddr reports whether the entry is an address or network.
func (e AllowEntry) IsAddr() bool { return e.Prefix.IsValid() }

// MatchesName reports whether a request for host (lower case, no port)
// falls under the entry's name, or, for an address entry, whether host is
// an address literal inside it.
func (e AllowEntry) MatchesName(host string) bool {
	if e.IsAddr() {
		a, err := netip.ParseAddr(host)
		return err == nil && e.Prefix.Contains(a.Unmap())
	}
	if e.Wildcard {
		return strings.HasSuffix(host, "."+e.Host)
	}
	return host == e.Host
}

// AllowsPort reports whether the entry lets a CONNECT (connect) or a plain
// HTTP request through to port.
func (e AllowEntry) AllowsPort(port uint16, connect bool) bool {
	if e.Port != 0 {
		return port == e.Port
	}
	if connect {
		return port == DefaultConnectPort
	}
	return port == DefaultHTTPPort
}

// Within reports whether everything e allows, ceiling allows too.
func (e AllowEntry) Within(ceiling AllowEntry) bool {
	if e.Port != ceiling.Port {
		return false
	}
	if e.IsAddr() || ceiling.IsAddr() {
		return e.IsAddr() && ceiling.IsAddr() && e.Prefix.Bits() >= ceiling.Prefix.Bits() && ceiling.Prefix.Contains(e.Prefix.Addr())
	}
	if !ceiling.Wildcard {
		return !e.Wildcard && e.Host == ceiling.Host
	}
	// *.a.example.com and x.example.com are inside *.example.com.
	return strings.HasSuffix(e.Host, "."+ceiling.Host) || (e.Wildcard && e.Host == ceiling.Host)
}

func (e AllowEntry) String() string {
	var h string
	switch {
	case e.IsAddr() && e.Prefix.IsSingleIP():
		h = e.Prefix.Addr().String()
	case e.IsAddr():
		h = e.Prefix.String()
	case e.Wildcard:
		h = "*." + e.Host
	default:
		h = e.Host
	}
	if e.Port == 0 {
		return h
	}
	if e.IsAddr() && e.Prefix.Addr().Is6() {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(int(e.Port))
}

// checkNetworkCeiling bounds a repository's network.allow by the server's:
// every entry the repository lists must fall inside one of the ceiling's.
func (l Limits) checkNetworkCeiling(c *Resolved, file string) Errors {
	if len(l.NetworkAllow) == 0 {
		return nil
	}
	var ceiling []AllowEntry
	for _, s := range l.NetworkAllow {
		e, err := ParseAllowEntry(s)
		if err != nil {
			return Errors{&FieldError{File: "server limits", Field: "network_allow", Msg: fmt.Sprintf("%q: %v", s, err)}}
		}
		ceiling = append(ceiling, e)
	}
	var errs Errors
	for i, s := range c.Network.Allow {
		e, err := ParseAllowEntry(s)
		if err != nil {
			continue // Verify reported it
		}
		inside := false
		for _, ce := range ceiling {
			if e.Within(ce) {
				inside = true
				break
			}
		}
		if !inside {
			errs = append(errs, &FieldError{File: file, Field: fmt.Sprintf("network.allow[%d]", i),
				Msg: fmt.Sprintf("%q is outside the server's network ceiling (limits.network_allow: %s)", s, strings.Join(l.NetworkAllow, ", "))})
		}
	}
	return errs
}
