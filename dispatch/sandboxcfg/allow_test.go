package sandboxcfg_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func TestAllowEntryParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Registry.NPMJS.org.":   "registry.npmjs.org",
		"*.GitHub.com":          "*.github.com",
		"git.corp:8443":         "git.corp:8443",
		"10.1.2.3":              "10.1.2.3",
		"10.1.2.3:5000":         "10.1.2.3:5000",
		"10.1.2.0/24":           "10.1.2.0/24",
		"10.1.2.9/24:22":        "10.1.2.0/24:22",
		"fd00::1":               "fd00::1",
		"[fd00::1]:8080":        "[fd00::1]:8080",
		"[fd00::/8]:8080":       "[fd00::/8]:8080",
		"::ffff:10.0.0.1":       "10.0.0.1",
		"my_host.internal:5432": "my_host.internal:5432",
	} {
		e, err := sandboxcfg.ParseAllowEntry(in)
		if err != nil {
			t.Errorf("ParseAllowEntry(%q): %v", in, err)
			continue
		}
		if got := e.String(); got != want {
			t.Errorf("ParseAllowEntry(%q) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "*", "*.", "https://x.com", "x.com:", "x.com:https", "x.com:0", "a b", "user@host", "*.*.x.com", "x.com/path", "[fd00::1", "[fd00::1]8080", "-x.com", "0.0.0.0.", "10.0.0.1.:22", "10.1", "*.1.2.3"} {
		if e, err := sandboxcfg.ParseAllowEntry(bad); err == nil {
			t.Errorf("ParseAllowEntry(%q) = %s, want an error", bad, e)
		}
	}
}

func TestAllowEntryPortsAndNames(t *testing.T) {
	t.Parallel()
	must := func(s string) sandboxcfg.AllowEntry {
		e, err := sandboxcfg.ParseAllowEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	plain, custom, wild, net := must("x.com"), must("x.com:8443"), must("*.x.com"), must("10.0.0.0/8")
	for _, c := range []struct {
		e       sandboxcfg.AllowEntry
		port    uint16
		connect bool
		want    bool
	}{
		{plain, 443, true, true}, {plain, 80, false, true}, {plain, 22, true, false}, {plain, 80, true, false}, {plain, 443, false, false},
		{custom, 8443, true, true}, {custom, 8443, false, true}, {custom, 443, true, false},
	} {
		if got := c.e.AllowsPort(c.port, c.connect); got != c.want {
			t.Errorf("%s.AllowsPort(%d, connect=%v) = %v", c.e, c.port, c.connect, got)
		}
	}
	for _, c := range []struct {
		e    sandboxcfg.AllowEntry
		host string
		want bool
	}{
		{plain, "x.com", true}, {plain, "a.x.com", false}, {wild, "a.x.com", true}, {wild, "x.com", false}, {wild, "ax.com", false},
		{net, "10.9.9.9", true}, {net, "11.0.0.1", false}, {net, "ten.example", false},
	} {
		if got := c.e.MatchesName(c.host); got != c.want {
			t.Errorf("%s.MatchesName(%q) = %v", c.e, c.host, got)
		}
	}
}

// A repository's network.allow can only narrow the server's: every entry
// must fall inside the ceiling, and no list at all means the ceiling.
func TestNetworkAllowCeiling(t *testing.T) {
	t.Parallel()
	limits := sandboxcfg.Limits{NetworkAllow: []string{"*.npmjs.org", "github.com", "git.corp:8443", "10.1.0.0/16:5000"}}
	for _, inside := range [][]string{
		{"registry.npmjs.org"}, {"*.a.npmjs.org"}, {"github.com"}, {"git.corp:8443"}, {"10.1.2.3:5000"}, {"10.1.2.0/24:5000"},
	} {
		repo := &sandboxcfg.Config{Network: sandboxcfg.Network{Allow: inside}}
		if _, err := sandboxcfg.Resolve(sandboxcfg.Config{}, repo, "acme/app/.sandbox.yml", sandboxcfg.Flags{}, limits); err != nil {
			t.Errorf("%v is inside the ceiling but was refused: %v", inside, err)
		}
	}
	for _, outside := range []string{"npmjs.org", "*.npmjs.org:8443", "api.github.com", "git.corp", "10.1.2.3", "10.2.0.1:5000", "10.0.0.0/8:5000", "*.org"} {
		repo := &sandboxcfg.Config{Network: sandboxcfg.Network{Allow: []string{"github.com", outside}}}
		_, err := sandboxcfg.Resolve(sandboxcfg.Config{}, repo, "acme/app/.sandbox.yml", sandboxcfg.Flags{}, limits)
		want := `acme/app/.sandbox.yml: network.allow[1]: "` + outside + `" is outside the server's network ceiling (limits.network_allow: *.npmjs.org, github.com, git.corp:8443, 10.1.0.0/16:5000)`
		if err == nil || err.Error() != want {
			t.Errorf("%q outside the ceiling: got %v, want %s", outside, err, want)
		}
	}
	got, err := sandboxcfg.Resolve(sandboxcfg.Config{}, &sandboxcfg.Config{}, "acme/app/.sandbox.yml", sandboxcfg.Flags{}, limits)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Network.Allow, ",") != strings.Join(limits.NetworkAllow, ",") {
		t.Errorf("a repository without network.allow gets %v, want the ceiling %v", got.Network.Allow, limits.NetworkAllow)
	}
	task, err := sandboxcfg.Resolve(sandboxcfg.Config{}, &sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: "true"}, "f", sandboxcfg.Flags{}, limits)
	if err != nil || len(task.Network.Allow) != 0 {
		t.Errorf("task mode (no fence possible) got allow %v, err %v", task, err)
	}
	bad := sandboxcfg.Limits{NetworkAllow: []string{"https://x"}}
	if _, err := sandboxcfg.Resolve(sandboxcfg.Config{}, &sandboxcfg.Config{Network: sandboxcfg.Network{Allow: []string{"x"}}}, "f", sandboxcfg.Flags{}, bad); err == nil || !strings.Contains(err.Error(), "network_allow") {
		t.Errorf("a bad ceiling is not reported: %v", err)
	}
}

// An entry that parses prints as an entry that parses to the same thing,
// and a ceiling always holds its own entries.
func FuzzParseAllowEntry(f *testing.F) {
	for _, s := range []string{"x.com", "*.x.com:8443", "10.0.0.0/8", "[fd00::1]:80", "::1", "a_b.c", "https://x", "x:", "0.0.0.0.", "10.1", "*.1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := sandboxcfg.ParseAllowEntry(s)
		if err != nil {
			return
		}
		again, err := sandboxcfg.ParseAllowEntry(e.String())
		if err != nil || again != e {
			t.Fatalf("%q parsed as %s, which parses as %+v, %v", s, e, again, err)
		}
		if !e.Within(e) {
			t.Fatalf("%s is not within itself", e)
		}
	})
}
