package sandboxinit

import (
	"context"
	"strings"
	"testing"
)

// The inner daemon's bridge moves off 172.17.0.0/16 when /etc/hosts names
// an address there that the sandbox reaches through its gateway (the
// engine's default bridge, as host.docker.internal, with the sandbox on
// the bot's own network), to a subnet clear of that address and of the
// sandbox's gateway; it stays where it is when the sandbox is itself on
// the default bridge.
func TestInnerNetworks(t *testing.T) {
	t.Parallel()
	hosts := `127.0.0.1	localhost
::1	localhost ip6-localhost
%OWN%	sandbox
172.17.0.1	host.docker.internal
172.17.0.1	egress-ok.test
# 10.9.9.9 commented
`
	for name, tc := range map[string]struct{ own, gw, want string }{
		"own network": {own: "172.18.0.5", gw: "172.18.0.1",
			want: "--bip 172.19.0.1/16 --default-address-pool base=172.20.0.0/16,size=24 --default-address-pool base=172.21.0.0/16,size=24"},
		"default bridge": {own: "172.17.0.5", gw: "", want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := func(_ context.Context, bin, _ string, args ...string) ([]byte, error) {
				a := args[len(args)-1]
				if bin != "ip" || strings.Join(args[:3], " ") != "-4 route get" {
					t.Errorf("unexpected %s %v", bin, args)
				}
				if tc.gw == "" || a == tc.own {
					return []byte(a + " dev eth0 src " + tc.own + " uid 0\n    cache\n"), nil
				}
				return []byte(a + " via " + tc.gw + " dev eth0 src " + tc.own + " uid 0\n    cache\n"), nil
			}
			n, err := innerNetworks(context.Background(), run, strings.ReplaceAll(hosts, "%OWN%", tc.own))
			if got := strings.Join(n.args(), " "); err != nil || got != tc.want {
				t.Errorf("innerNetworks = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
