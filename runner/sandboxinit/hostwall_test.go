package sandboxinit

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The host wall in the init: asked to (EnvDenyHost), it denies its default
// routes' gateways and host.docker.internal, every port; the host ports
// excepted (EnvAllowHosts, host.docker.internal read from /etc/hosts)
// come right after DNS, before every deny, in both families.
func TestHostWallRules(t *testing.T) {
	t.Parallel()
	view := hostView{
		hosts: "127.0.0.1 localhost\n172.17.0.1 host.docker.internal\nfd00:dead::1 host.docker.internal # v6\n",
		gateways: append(defaultGateways4("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
			"eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"),
			defaultGateways6("00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd00cafe000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n")...),
	}
	if want := []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("fd00:cafe::1")}; len(view.gateways) != 2 || view.gateways[0] != want[0] || view.gateways[1] != want[1] {
		t.Fatalf("gateways %v, want %v", view.gateways, want)
	}
	env := map[string]string{dispatch.EnvDenyHost: "1", dispatch.EnvAllowHosts: "host.docker.internal:3000,10.0.0.1:8443"}
	fc, err := fenceFromEnv(func(k string) string { return env[k] }, view)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTables{}
	rc := resolvConf(t, "nameserver 192.168.0.1\n")
	if err := installDeny(context.Background(), f.run, fc, rc, true, chainDocker); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.cmds, "\n")
	order := []string{
		"iptables -A SANDBOX-DENY -d 192.168.0.1 -p udp --dport 53 -j RETURN",
		"iptables -A SANDBOX-DENY -d 172.17.0.1/32 -p tcp --dport 3000 -j RETURN",
		"iptables -A SANDBOX-DENY -d 172.17.0.1/32 -p udp --dport 3000 -j RETURN",
		"iptables -A SANDBOX-DENY -d 10.0.0.1/32 -p tcp --dport 8443 -j RETURN",
		"iptables -A SANDBOX-DENY -d 169.254.0.0/16 -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-DENY -d 192.168.0.1/32 -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -A SANDBOX-DENY -d 172.17.0.1/32 -p tcp -j REJECT --reject-with tcp-reset",
		"iptables -I DOCKER-USER 1 -j SANDBOX-DENY",
		"ip6tables -A SANDBOX-DENY -d fd00:dead::1/128 -p tcp --dport 3000 -j RETURN",
		"ip6tables -A SANDBOX-DENY -d fe80::/10 -p tcp -j REJECT --reject-with tcp-reset",
		"ip6tables -A SANDBOX-DENY -d fd00:cafe::1/128 -p tcp -j REJECT --reject-with tcp-reset",
		"ip6tables -A SANDBOX-DENY -d fd00:dead::1/128 -p tcp -j REJECT --reject-with tcp-reset",
		"ip6tables -I FORWARD 1 -j SANDBOX-DENY",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(got[at:], want)
		if i < 0 {
			t.Fatalf("the rules lack %q after position %d, or have it out of order:\n%s", want, at, got)
		}
		at += i + len(want)
	}
	// Without EnvDenyHost the host stays as it was; a bad entry names
	// itself and the variable; a name /etc/hosts lacks is an error.
	fc, err = fenceFromEnv(func(string) string { return "" }, view)
	if err != nil || len(fc.deny) != len(dispatch.DefaultDenyNets()) || len(fc.allow) != 0 {
		t.Errorf("no wall asked: %+v %v", fc, err)
	}
	for allow, want := range map[string]string{
		"10.0.0.1":                               `entry "10.0.0.1": no port`,
		"localhost:80":                           `"localhost" is not an IPv4 address`,
		"${attr.unique.network.ip-address}:3000": "not interpolated",
	} {
		_, err := fenceFromEnv(func(k string) string { return map[string]string{dispatch.EnvAllowHosts: allow}[k] }, view)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dispatch.EnvAllowHosts) {
			t.Errorf("%s=%q: %v, want an error saying %q", dispatch.EnvAllowHosts, allow, err, want)
		}
	}
	if _, err := fenceFromEnv(func(k string) string { return map[string]string{dispatch.EnvAllowHosts: "host.docker.internal:1"}[k] }, hostView{}); err == nil {
		t.Errorf("host.docker.internal without an /etc/hosts entry: no error")
	}
}

// The filtering proxy holds the same exceptions: a denied host port the
// wall excepts is dialed, its neighbours are not.
func TestProxyKeepsTheHostWallsExceptions(t *testing.T) {
	t.Parallel()
	a, err := newAllowlist(nil, nil, []dispatch.DenyNet{{Prefix: netip.MustParsePrefix("172.17.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	a.exempt = []dispatch.DenyNet{{Prefix: netip.MustParsePrefix("172.17.0.1/32"), Port: 3000}}
	gw := netip.MustParseAddr("172.17.0.1")
	if err := a.checkDeny(gw, 3000); err != nil {
		t.Errorf("the excepted port: %v", err)
	}
	if err := a.checkDeny(gw, 3001); err == nil {
		t.Errorf("another port of the host: not refused")
	}
}
