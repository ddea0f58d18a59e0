package sandboxinit

// Egress defaults: whatever network.allow says, nothing in a coding
// sandbox (the runner, the agent, root's own processes, the inner daemon's
// containers) opens a connection to link-local addresses (cloud metadata),
// the bot's listener, the Nomad API or the operator's extra networks. The
// backend names them in SANDBOX_DENY_NETS; the init rejects them with
// iptables in OUTPUT (every uid: nothing inside needs them) and in the
// inner daemon's DOCKER-USER chain (forwarded container traffic), before
// any service or agent runs. DNS to the configured resolvers stays open,
// even when a resolver sits on a denied network (AWS's 169.254.169.253).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

const chainDeny = "SANDBOX-DENY"

// denyNetsFromEnv is the default deny list plus the backend's.
func denyNetsFromEnv(getenv func(string) string) ([]dispatch.DenyNet, error) {
	extra, err := dispatch.ParseDenyNets(getenv(dispatch.EnvDenyNets))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dispatch.EnvDenyNets, err)
	}
	return append(dispatch.DefaultDenyNets(), extra...), nil
}

// denyRules fills chainDeny for one address family. A TCP connection gets
// a reset and anything else an ICMP error, so a client fails at once with
// "connection refused" instead of waiting for a timeout.
func denyRules(nets []dispatch.DenyNet, nameservers []string, v6 bool) [][]string {
	var rules [][]string
	for _, ns := range nameservers {
		rules = append(rules,
			[]string{"-A", chainDeny, "-d", ns, "-p", "udp", "--dport", "53", "-j", "RETURN"},
			[]string{"-A", chainDeny, "-d", ns, "-p", "tcp", "--dport", "53", "-j", "RETURN"})
	}
	for _, n := range nets {
		if n.Prefix.Addr().Is6() != v6 {
			continue
		}
		d := n.Prefix.String()
		if n.Port == 0 {
			rules = append(rules,
				[]string{"-A", chainDeny, "-d", d, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
				[]string{"-A", chainDeny, "-d", d, "-j", "REJECT"})
			continue
		}
		port := strconv.Itoa(int(n.Port))
		rules = append(rules,
			[]string{"-A", chainDeny, "-d", d, "-p", "tcp", "--dport", port, "-j", "REJECT", "--reject-with", "tcp-reset"},
			[]string{"-A", chainDeny, "-d", d, "-p", "udp", "--dport", port, "-j", "REJECT"})
	}
	return rules
}

// installDeny writes the deny chain and its jumps for IPv4 and, when the
// sandbox has IPv6 beyond loopback, IPv6, one batch per family.
// forwardV4, when not empty, adds the jumps for the inner daemon's
// containers: from that chain for IPv4 (DOCKER-USER, which the daemon
// keeps first in FORWARD, and whose rules it keeps when the chain exists
// before it starts, so the fence can be in place before the daemon is; or
// FORWARD where the daemon writes no rules, see netfilter.go), FORWARD
// itself for IPv6 (the daemon leaves ip6tables alone unless told
// otherwise).
func installDeny(ctx context.Context, run ipTables, fc denyFence, resolvConf string, hasIPv6 bool, forwardV4 string) error {
	v4, v6 := nameservers(resolvConf)
	type plan struct {
		fam     family
		ns      []string
		forward string
	}
	withForward := forwardV4 != ""
	plans := []plan{{familyV4, v4, forwardV4}}
	if hasIPv6 {
		plans = append(plans, plan{familyV6, v6, "FORWARD"})
	}
	for _, p := range plans {
		b, err := newBatch(ctx, run, p.fam)
		if err != nil {
			return err
		}
		b.chain(chainDeny)
		rules := denyRules(fc.deny, p.ns, p.fam.v6)
		// The exceptions after DNS, before every deny.
		rules = append(rules[:2*len(p.ns):2*len(p.ns)], append(allowRules(fc.allow, p.fam.v6), rules[2*len(p.ns):]...)...)
		for _, r := range rules {
			b.rule(r...)
		}
		b.jump([]string{"OUTPUT", "-j", chainDeny})
		if withForward {
			if p.forward == chainDocker {
				b.ensureChain(chainDocker)
			}
			b.jump([]string{p.forward, "-j", chainDeny})
		}
		if err := b.commit(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// denyState is what the init did about the egress defaults.
type denyState struct {
	nets  []dispatch.DenyNet
	allow []dispatch.DenyNet // the host ports excepted, before nets
	done  bool
}

// egressDefaults installs the egress defaults, once per start, and keeps
// what it found: the denied networks and their exceptions (which the
// allowlist's proxy refuses and lets through too) and the iptables that
// works (which every later fence and the inner daemon use).
type egressDefaults struct {
	log   zerolog.Logger
	order *dispatch.WorkOrder
	inner bool // the fence covers the inner daemon's containers
	ipv6  bool

	deny denyState
	nf   *netfilter // the iptables variant and dockerd's rules, picked by trial (netfilter.go)
}

// enforce installs the deny fence once per start. A coding
// sandbox whose init cannot install it does not run: the agent would
// reach the cloud's metadata and the bot. Neither does a task sandbox,
// whose init fenced it as root before becoming the sandbox user
// (taskfence.go).
func (ed *egressDefaults) enforce(ctx context.Context, run ipTables) error {
	return ed.apply(ctx, run, os.Geteuid(), os.Getenv, "/etc/resolv.conf", readHostView())
}

func (ed *egressDefaults) apply(ctx context.Context, run ipTables, euid int, getenv func(string) string, resolvConf string, view hostView) error {
	if ed.deny.done {
		return nil
	}
	fc, err := fenceFromEnv(getenv, view)
	if err != nil {
		return err
	}
	nets := fc.deny
	ed.deny.nets, ed.deny.allow = nets, fc.allow
	if euid != 0 {
		switch {
		case ed.order == nil:
			ed.log.Info().Msg("no work order and not root: egress defaults not enforced")
		case taskMode(ed.order):
			// The init's root half fenced it before becoming this user
			// (taskfence.go), or the run does not go on.
			if err := taskFenceResult(getenv); err != nil {
				return fmt.Errorf("egress defaults could not be installed, so the sandbox would reach cloud metadata, the bot and its host: %w", err)
			}
			ed.log.Info().Str("deny", dispatch.FormatDenyNets(nets)).Str("allow", dispatch.FormatDenyNets(fc.allow)).Msg("egress defaults enforced before the init dropped to the sandbox user")
		default:
			return errors.New("the sandbox init is not root, so it cannot fence off link-local addresses and the bot's own addresses " +
				"(coding sandboxes need the privileged or caps profile)")
		}
		ed.deny.done = true
		return nil
	}
	nf, err := pickNetfilter(ctx, run, ed.inner)
	if err != nil {
		return fmt.Errorf("egress defaults could not be installed, so the sandbox would reach cloud metadata and the bot: %w", err)
	}
	ed.nf = &nf
	ed.log.Info().Str("kernel", kernelRelease()).Bool("legacy", nf.legacy).Bool("daemon_rules", nf.daemonRules).Strs("why", nf.reasons).Msg("iptables chosen")
	run = nf.runner(run)
	forward := ""
	if ed.inner {
		forward = nf.forwardFrom()
	}
	if err := installDeny(ctx, run, fc, resolvConf, ed.ipv6, forward); err != nil {
		return fmt.Errorf("egress defaults could not be installed, so the sandbox would reach cloud metadata and the bot: %w", err)
	}
	if ed.inner {
		if err := nf.installNAT(ctx, run, ipv4Uplinks()); err != nil {
			return err
		}
	}
	ed.deny.done = true
	ed.log.Info().Str("deny", dispatch.FormatDenyNets(nets)).Str("allow", dispatch.FormatDenyNets(fc.allow)).Bool("inner_containers", ed.inner).Msg("egress defaults enforced")
	return nil
}

// netfilter is what enforce found (Linux's own before it).
func (ed *egressDefaults) netfilter() netfilter {
	if ed.nf == nil {
		return kernelNetfilter
	}
	return *ed.nf
}
