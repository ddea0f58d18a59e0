package sandboxinit

// What the sandbox's kernel offers the fences and the inner daemon, found
// by trial when a coding sandbox starts, before the first rule.
//
// On Linux's own kernel (the privileged and caps profiles) the image's
// iptables (the nft variant) works, and dockerd writes its own NAT and
// forwarding rules, keeping the init's DOCKER-USER chain first in FORWARD.
// Under gVisor (the gvisor profile) the kernel is gVisor's: its netstack
// implements the legacy iptables interface only (the nft variant fails
// with "Failed to initialize nft: Protocol not supported"), with the
// filter and nat tables, the owner, tcp, udp, mark and multiport matches
// and the RETURN, ACCEPT, DROP, REJECT (tcp-reset, icmp-port-unreachable),
// SNAT, DNAT and REDIRECT targets, but no conntrack or addrtype match and
// no MASQUERADE, which dockerd's own rules need ("iptables: Invalid
// argument"). There the init picks iptables-legacy, starts dockerd with
// --iptables=false (published ports are then served by docker-proxy, in
// user space) and with the legacy tools first on its PATH (its embedded
// DNS for user-defined networks still writes its DNAT rules inside each
// container's namespace), writes the inner bridges' source NAT itself,
// and jumps to its fences from FORWARD instead of DOCKER-USER.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// netfilter is the choice, with the reasons logged at start.
type netfilter struct {
	// legacy: the iptables-legacy tools, for the init and the inner daemon.
	legacy bool
	// daemonRules: dockerd writes its own NAT and forwarding rules
	// (conntrack, addrtype and MASQUERADE work). Without them the init
	// writes the NAT, and no rule may rely on conntrack.
	daemonRules bool
	reasons     []string
}

// kernelNetfilter is what Linux's own kernel offers: the image's default
// tools and dockerd's own rules. It is the choice for tests of the rules
// and for a start that has not probed.
var kernelNetfilter = netfilter{daemonRules: true}

// legacyShimDir holds iptables, iptables-save ... named links to the
// legacy tools, first on the inner daemon's PATH when legacy is picked.
const legacyShimDir = "/run/sandbox-iptables"

// probeChain is the scratch chain of the trial of dockerd's rules.
const probeChain = "SANDBOX-PROBE"

// pickNetfilter tries the image's iptables and then the legacy variant
// (one iptables-save each), and, when an inner daemon will run, whether
// the rules dockerd writes go in (one batch in a scratch chain, removed).
func pickNetfilter(ctx context.Context, run ipTables, innerDaemon bool) (netfilter, error) {
	var nf netfilter
	out, err := run(ctx, familyV4.save, "", "-t", "filter")
	if err == nil {
		nf.reasons = append(nf.reasons, "iptables: the image's default variant works")
	} else {
		first := fmt.Sprintf("the image's default iptables refused: %s -t filter: %v: %s", familyV4.save, err, oneLine(out))
		out, err = run(ctx, legacyTool(familyV4.save), "", "-t", "filter")
		if err != nil {
			return nf, fmt.Errorf("no iptables works here, so no fence can be installed: %s; %s -t filter: %v: %s",
				first, legacyTool(familyV4.save), err, oneLine(out))
		}
		nf.legacy = true
		nf.reasons = append(nf.reasons, first, "iptables-legacy: works (gVisor implements the legacy interface only)")
	}
	if !innerDaemon {
		nf.daemonRules = true
		return nf, nil
	}
	tool := nf.tool(familyV4.restore)
	probe := "*filter\n:" + probeChain + " - [0:0]\n-A " + probeChain + " -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\nCOMMIT\n" +
		"*nat\n:" + probeChain + " - [0:0]\n-A " + probeChain + " -m addrtype --dst-type LOCAL -j RETURN\n-A " + probeChain + " -j MASQUERADE\nCOMMIT\n"
	out, err = run(ctx, tool, probe, "--noflush", "-w", "5")
	// The trial's chains go whatever it did: a table it committed keeps
	// its chain until this removes it.
	cleanup := "*filter\n:" + probeChain + " - [0:0]\n-X " + probeChain + "\nCOMMIT\n*nat\n:" + probeChain + " - [0:0]\n-X " + probeChain + "\nCOMMIT\n"
	if cout, cerr := run(ctx, tool, cleanup, "--noflush", "-w", "5"); cerr != nil {
		return nf, fmt.Errorf("remove the trial chain %s: %s: %v: %s", probeChain, tool, cerr, oneLine(cout))
	}
	if err == nil {
		nf.daemonRules = true
		nf.reasons = append(nf.reasons, "dockerd writes its own rules: conntrack, addrtype and MASQUERADE work")
		return nf, nil
	}
	nf.reasons = append(nf.reasons, fmt.Sprintf("dockerd runs with --iptables=false and the init writes the inner bridges' NAT: "+
		"the kernel refuses a rule dockerd needs (conntrack, addrtype or MASQUERADE: %s)", oneLine(out)))
	return nf, nil
}

// legacyTool is the legacy variant's name of an iptables tool:
// iptables-save is iptables-legacy-save, ip6tables-restore
// ip6tables-legacy-restore.
func legacyTool(bin string) string {
	for _, p := range []string{"ip6tables", "iptables"} {
		if rest, ok := strings.CutPrefix(bin, p); ok && !strings.HasPrefix(rest, "-legacy") {
			return p + "-legacy" + rest
		}
	}
	return bin
}

// tool is the name of an iptables tool in the variant picked.
func (n netfilter) tool(bin string) string {
	if n.legacy {
		return legacyTool(bin)
	}
	return bin
}

// runner runs the variant picked through run.
func (n netfilter) runner(run ipTables) ipTables {
	if !n.legacy {
		return run
	}
	return func(ctx context.Context, bin, stdin string, args ...string) ([]byte, error) {
		return run(ctx, legacyTool(bin), stdin, args...)
	}
}

// forwardFrom is the chain the fences hold inner containers' IPv4 traffic
// from: DOCKER-USER, which dockerd keeps first in FORWARD when it writes
// its rules, else FORWARD itself, which nothing else writes then.
func (n netfilter) forwardFrom() string {
	if n.daemonRules {
		return chainDocker
	}
	return "FORWARD"
}

// daemonArgs are dockerd's flags for the choice.
func (n netfilter) daemonArgs() []string {
	if n.daemonRules {
		return nil
	}
	return []string{"--iptables=false", "--ip6tables=false"}
}

// daemonEnv puts the legacy tools first on dockerd's PATH, under the
// names it calls (iptables, iptables-save ...), made in legacyShimDir.
func (n netfilter) daemonEnv() ([]string, error) {
	if !n.legacy {
		return nil, nil
	}
	if err := os.MkdirAll(legacyShimDir, 0o755); err != nil {
		return nil, fmt.Errorf("iptables-legacy for dockerd: %w", err)
	}
	for _, name := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		target, err := exec.LookPath(legacyTool(name))
		if err != nil {
			return nil, fmt.Errorf("iptables-legacy for dockerd: %w", err)
		}
		link := filepath.Join(legacyShimDir, name)
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err := os.Symlink(target, link); err != nil {
			return nil, fmt.Errorf("iptables-legacy for dockerd: %w", err)
		}
	}
	return []string{"PATH=" + legacyShimDir + string(os.PathListSeparator) + os.Getenv("PATH")}, nil
}

// natRules are the source NAT dockerd would write: what leaves by an
// uplink gets the uplink's address. gVisor's SNAT takes TCP and UDP (the
// rule must name the protocol for ports to be mapped); ICMP from inner
// containers does not leave.
func natRules(uplinks map[string]string) [][]string {
	var rules [][]string
	for _, name := range slices.Sorted(maps.Keys(uplinks)) {
		for _, proto := range []string{"tcp", "udp"} {
			rules = append(rules, []string{"-A", "POSTROUTING", "-o", name, "-p", proto, "-j", "SNAT", "--to-source", uplinks[name]})
		}
	}
	return rules
}

// installNAT writes natRules when dockerd does not write its own.
func (n netfilter) installNAT(ctx context.Context, run ipTables, uplinks map[string]string) error {
	if n.daemonRules || len(uplinks) == 0 {
		return nil
	}
	b, err := newTableBatch(ctx, run, familyV4, "nat")
	if err != nil {
		return err
	}
	for _, r := range natRules(uplinks) {
		if !b.existing[strings.Join(r, " ")] {
			b.rule(r...)
		}
	}
	if err := b.commit(ctx, run); err != nil {
		return fmt.Errorf("the inner containers' NAT: %w", err)
	}
	return nil
}

// ipv4Uplinks are the interfaces with an IPv4 address that the sandbox
// had when it started (before the inner daemon made its bridges): name to
// address.
func ipv4Uplinks() map[string]string {
	out := map[string]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		return out
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				out[ifc.Name] = ipn.IP.String()
				break
			}
		}
	}
	return out
}

// kernelRelease is uname -r: "4.19.0-gvisor" under gVisor, whatever the
// host runs, since gVisor answers the call itself.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

// oneLine is a tool's output on one line, for a log field.
func oneLine(out []byte) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", " ; ")), " ")
}
