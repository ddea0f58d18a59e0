package sandboxinit

import (
	"context"
	"strings"
	"testing"
)

// The addresses /etc/hosts names beyond the sandbox's own link (the
// engine's default bridge, as host.docker.internal) get a host route via
// the default gateway, once each; loopback, the sandbox's own address and
// IPv6 get none.
func TestPinHostRoutes(t *testing.T) {
	t.Parallel()
	hosts := `127.0.0.1	localhost
::1	localhost ip6-localhost
172.18.0.5	sandbox
172.17.0.1	host.docker.internal
172.17.0.1	egress-ok.test
# 10.9.9.9 commented
10.1.2.3	db.internal
`
	var cmds []string
	run := func(_ context.Context, bin, _ string, args ...string) ([]byte, error) {
		cmd := bin + " " + strings.Join(args, " ")
		cmds = append(cmds, cmd)
		switch {
		case strings.HasSuffix(cmd, "get 172.18.0.5"):
			return []byte("local 172.18.0.5 dev lo table local src 172.18.0.5 uid 0\n    cache <local>\n"), nil
		case strings.Contains(cmd, " get "):
			a := args[len(args)-1]
			return []byte(a + " via 172.18.0.1 dev eth0 src 172.18.0.5 uid 0\n    cache\n"), nil
		}
		return nil, nil
	}
	pinned, err := pinHostRoutes(context.Background(), run, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pinned, " "); got != "172.17.0.1 10.1.2.3" {
		t.Errorf("pinned %q", got)
	}
	want := []string{
		"ip -4 route get 172.18.0.5",
		"ip -4 route get 172.17.0.1",
		"ip -4 route replace 172.17.0.1/32 via 172.18.0.1 dev eth0",
		"ip -4 route get 10.1.2.3",
		"ip -4 route replace 10.1.2.3/32 via 172.18.0.1 dev eth0",
	}
	if got := strings.Join(cmds, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}
