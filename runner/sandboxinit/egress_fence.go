package sandboxinit

// The egress fence: iptables rules that keep the sandbox user (and the
// inner containers it starts) from reaching anything but loopback, the
// inner Docker networks and the resolvers, so a program that ignores the
// proxy variables cannot get out either.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Chains the init owns. A restarted container gets a fresh network
// namespace, but the rules are written to be re-applied anyway.
const (
	chainEgress  = "SANDBOX-EGRESS"
	chainForward = "SANDBOX-EGRESS-FWD"
	chainDocker  = "DOCKER-USER"
)

// fenceRules are the rules that keep uid's connections on loopback (the
// proxy and local dev servers), the inner Docker networks (services) and
// the resolvers of resolv.conf. Everything else it opens is rejected at
// once (a TCP reset, not a silent drop), so a tool fails fast with
// "connection refused" instead of hanging.
func fenceRules(nameservers []string) [][]string {
	rules := [][]string{
		{"-A", chainEgress, "-o", "lo", "-j", "RETURN"},
		// The inner daemon's default bridge and its user-defined networks
		// (the sandbox network, and any the agent creates later).
		{"-A", chainEgress, "-o", "docker0", "-j", "RETURN"},
		{"-A", chainEgress, "-o", "br-+", "-j", "RETURN"},
	}
	for _, ns := range nameservers {
		rules = append(rules,
			[]string{"-A", chainEgress, "-d", ns, "-p", "udp", "--dport", "53", "-j", "RETURN"},
			[]string{"-A", chainEgress, "-d", ns, "-p", "tcp", "--dport", "53", "-j", "RETURN"})
	}
	return append(rules,
		[]string{"-A", chainEgress, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
		[]string{"-A", chainEgress, "-j", "REJECT"},
	)
}

// jumpRule sends the sandbox user's packets through the fence.
func jumpRule(uid int) []string {
	return []string{"OUTPUT", "-m", "owner", "--uid-owner", strconv.Itoa(uid), "-j", chainEgress}
}

// gidJumpRule sends the packets of processes whose group is gid through
// the fence: the inner dockerd runs as root with a group of its own
// (daemonGID), so its pulls, pushes and fetches can leave only through the
// proxy.
func gidJumpRule(gid int) []string {
	return []string{"OUTPUT", "-m", "owner", "--gid-owner", strconv.Itoa(gid), "-j", chainEgress}
}

// forwardRules keep the inner containers (which the sandbox user starts
// through the inner daemon, as root, in their own namespaces) from going
// around the fence: they may talk to each other and answer, not go out.
// Answers to connections that dockerd's DNAT brought in (published ports)
// are told by conntrack; where dockerd writes no rules (netfilter.go) there
// is no DNAT, published ports are docker-proxy's, and the kernel has no
// conntrack match to ask.
func forwardRules(conntrack bool) [][]string {
	var rules [][]string
	if conntrack {
		rules = append(rules, []string{"-A", chainForward, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"})
	}
	return append(rules,
		[]string{"-A", chainForward, "-o", "docker0", "-j", "RETURN"},
		[]string{"-A", chainForward, "-o", "br-+", "-j", "RETURN"},
		[]string{"-A", chainForward, "-j", "REJECT"},
	)
}

// fenceSpec is what one installation of the fence covers.
type fenceSpec struct {
	// uids and gids are the owners whose packets the fence holds.
	uids, gids []int
	resolvConf string
	// ipv6 fences IPv6 as well (the sandbox has IPv6 beyond loopback).
	ipv6 bool
	// forward adds the inner-container rules (only when an inner daemon
	// runs): from DOCKER-USER for IPv4, which the daemon keeps first in
	// FORWARD, and from FORWARD itself for IPv6, which it leaves alone.
	forward bool
	// nf is what the kernel offers (netfilter.go); nil is Linux's own.
	nf *netfilter
}

func (s fenceSpec) netfilter() netfilter {
	if s.nf == nil {
		return kernelNetfilter
	}
	return *s.nf
}

// fence installs the rules with iptables and, with spec.ipv6, ip6tables,
// one batch per family.
func fence(ctx context.Context, run ipTables, spec fenceSpec) error {
	run = spec.netfilter().runner(run)
	v4, v6 := nameservers(spec.resolvConf)
	if err := fenceFamily(ctx, run, familyV4, spec, v4); err != nil {
		return err
	}
	if spec.ipv6 {
		if err := fenceFamily(ctx, run, familyV6, spec, v6); err != nil {
			return fmt.Errorf("the sandbox has IPv6 addresses, so it needs the IPv6 fence too: %w", err)
		}
	}
	return nil
}

func fenceFamily(ctx context.Context, run ipTables, fam family, spec fenceSpec, ns []string) error {
	b, err := newBatch(ctx, run, fam)
	if err != nil {
		return err
	}
	b.chain(chainEgress)
	for _, r := range fenceRules(ns) {
		b.rule(r...)
	}
	for _, uid := range spec.uids {
		b.jump(jumpRule(uid))
	}
	for _, gid := range spec.gids {
		b.jump(gidJumpRule(gid))
	}
	if spec.forward {
		nf := spec.netfilter()
		b.chain(chainForward)
		for _, r := range forwardRules(nf.daemonRules) {
			b.rule(r...)
		}
		from := "FORWARD"
		if !fam.v6 {
			from = nf.forwardFrom()
		}
		if from == chainDocker {
			b.ensureChain(chainDocker)
		}
		for _, in := range []string{"br-+", "docker0"} {
			b.jump([]string{from, "-i", in, "-j", chainForward})
		}
	}
	if err := b.commit(ctx, run); err != nil {
		if len(spec.uids)+len(spec.gids) > 0 {
			return fmt.Errorf("%w (the owner match, xt_owner / nft meta skuid, must be available: without it the sandbox user cannot be told apart)", err)
		}
		return err
	}
	return nil
}

// nameservers reads the resolvers from a resolv.conf, by address family.
func nameservers(path string) (v4, v6 []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip := net.ParseIP(strings.SplitN(f[1], "%", 2)[0])
		switch {
		case ip == nil:
		case ip.To4() != nil:
			v4 = append(v4, ip.String())
		default:
			v6 = append(v6, ip.String())
		}
	}
	return v4, v6
}

// hasIPv6 reports whether any interface has an IPv6 address other than
// loopback: only then is there an IPv6 way out to fence.
func hasIPv6() bool {
	ifs, err := net.Interfaces()
	if err != nil {
		return true // fail closed: fence it (and fail if we cannot)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.To16() != nil {
				return true
			}
		}
	}
	return false
}
