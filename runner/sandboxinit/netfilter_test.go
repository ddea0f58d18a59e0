package sandboxinit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// kernelTables answers like an iptables on a kernel of the given kind:
// "linux" (the nft variant works, so do dockerd's rules), "gvisor" (the
// nft variant fails, legacy works, conntrack is refused) or "none".
type kernelTables struct {
	kind  string
	calls []string
	fake  *fakeTables // the rules of the batches past the trial
}

func (k *kernelTables) run(ctx context.Context, bin, stdin string, args ...string) ([]byte, error) {
	k.calls = append(k.calls, bin+" "+strings.Join(args, " "))
	legacy := strings.Contains(bin, "-legacy")
	switch {
	case k.kind == "none", k.kind == "gvisor" && !legacy:
		return []byte("iptables-save/1.8.9 (nf_tables) Failed to initialize nft: Protocol not supported"), errors.New("exit status 1")
	case strings.Contains(stdin, probeChain):
		if k.kind == "gvisor" && strings.Contains(stdin, "conntrack") {
			return []byte("Warning: Extension conntrack revision 0 not supported, missing kernel module?\niptables-restore: line 4 failed"), errors.New("exit status 1")
		}
		return nil, nil
	}
	return k.fake.run(ctx, strings.Replace(bin, "-legacy", "", 1), stdin, args...)
}

// The trial picks the image's iptables and dockerd's own rules on Linux,
// iptables-legacy and the init's own NAT under gVisor, and fails naming
// both variants where neither works; the trial's chain is always removed.
func TestPickNetfilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind                string
		legacy, daemonRules bool
		err                 string
	}{
		{kind: "linux", daemonRules: true},
		{kind: "gvisor", legacy: true},
		{kind: "none", err: "no iptables works here"},
	} {
		k := &kernelTables{kind: tc.kind, fake: &fakeTables{}}
		nf, err := pickNetfilter(context.Background(), k.run, true)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "iptables-legacy-save") {
				t.Errorf("%s: %v, want an error naming both variants", tc.kind, err)
			}
			continue
		}
		if err != nil || nf.legacy != tc.legacy || nf.daemonRules != tc.daemonRules {
			t.Errorf("%s: %+v, %v; want legacy %v, daemon rules %v", tc.kind, nf, err, tc.legacy, tc.daemonRules)
		}
		if last := k.calls[len(k.calls)-1]; !strings.HasPrefix(last, nf.tool("iptables-restore")+" --noflush") {
			t.Errorf("%s: the trial chain was not removed last: %v", tc.kind, k.calls)
		}
		t.Logf("%s: %s", tc.kind, strings.Join(nf.reasons, "; "))
	}
	// Without an inner daemon there is nothing to try of dockerd's rules.
	k := &kernelTables{kind: "gvisor", fake: &fakeTables{}}
	if nf, err := pickNetfilter(context.Background(), k.run, false); err != nil || !nf.legacy || len(k.calls) != 2 {
		t.Errorf("no inner daemon: %+v, %v, calls %v", nf, err, k.calls)
	}
}

// Under gVisor every fence goes in with the legacy tools, the inner
// containers' jumps come from FORWARD (dockerd writes no DOCKER-USER),
// the forward chain asks nothing of conntrack, the init writes the
// bridges' source NAT, and dockerd is told to keep off iptables with the
// legacy tools first on its PATH.
func TestGVisorNetfilterRules(t *testing.T) {
	t.Parallel()
	k := &kernelTables{kind: "gvisor", fake: &fakeTables{}}
	nf, err := pickNetfilter(context.Background(), k.run, true)
	if err != nil {
		t.Fatal(err)
	}
	rc := resolvConf(t, "nameserver 10.255.255.53\n")
	run := nf.runner(k.run)
	if err := installDeny(context.Background(), run, denyFence{}, rc, false, nf.forwardFrom()); err != nil {
		t.Fatal(err)
	}
	if err := fence(context.Background(), k.run, fenceSpec{uids: []int{1000}, gids: []int{daemonGID}, resolvConf: rc, forward: true, nf: &nf}); err != nil {
		t.Fatal(err)
	}
	if err := nf.installNAT(context.Background(), run, map[string]string{"eth0": "172.17.0.3"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(k.fake.cmds, "\n")
	for _, want := range []string{
		"iptables -I FORWARD 1 -j SANDBOX-DENY",
		"iptables -I FORWARD 1 -i br-+ -j SANDBOX-EGRESS-FWD",
		"iptables -I FORWARD 1 -i docker0 -j SANDBOX-EGRESS-FWD",
		"iptables -A SANDBOX-EGRESS-FWD -j REJECT",
		"iptables -t nat -A POSTROUTING -o eth0 -p tcp -j SNAT --to-source 172.17.0.3",
		"iptables -t nat -A POSTROUTING -o eth0 -p udp -j SNAT --to-source 172.17.0.3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q among:\n%s", want, got)
		}
	}
	for _, never := range []string{"DOCKER-USER", "conntrack"} {
		if strings.Contains(got, never) {
			t.Errorf("%q under gVisor:\n%s", never, got)
		}
	}
	for _, c := range k.calls[1:] {
		if !strings.Contains(strings.Fields(c)[0], "-legacy") {
			t.Errorf("%q: not the legacy tools", c)
		}
	}
	if args := nf.daemonArgs(); !slices.Equal(args, []string{"--iptables=false", "--ip6tables=false"}) {
		t.Errorf("dockerd's flags %v", args)
	}
	if args := kernelNetfilter.daemonArgs(); args != nil {
		t.Errorf("on Linux dockerd writes its rules; flags %v", args)
	}
}

func TestLegacyTool(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"iptables-save": "iptables-legacy-save", "iptables-restore": "iptables-legacy-restore", "iptables": "iptables-legacy",
		"ip6tables-save": "ip6tables-legacy-save", "iptables-legacy-save": "iptables-legacy-save", "docker": "docker",
	} {
		if got := legacyTool(in); got != want {
			t.Errorf("legacyTool(%q) = %q, want %q", in, got, want)
		}
	}
}
