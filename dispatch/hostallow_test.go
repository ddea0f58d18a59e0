package dispatch

import (
	"strings"
	"testing"
)

// SANDBOX_HOST_ALLOW's syntax: host:port entries, IPv6 in brackets,
// host.docker.internal or a Nomad interpolation by name; every error names
// its entry.
func TestParseHostAllow(t *testing.T) {
	t.Parallel()
	got, err := ParseHostAllow(" 10.0.0.1:3000, [fd00::1]:8443,HOST.DOCKER.INTERNAL:9000,${attr.unique.network.ip-address}:4647,,")
	if err != nil {
		t.Fatal(err)
	}
	if s := FormatHostAllow(append(got, got[0])); s != "10.0.0.1:3000,[fd00::1]:8443,host.docker.internal:9000,${attr.unique.network.ip-address}:4647" {
		t.Errorf("formatted: %q", s)
	}
	for in, want := range map[string]string{
		"10.0.0.1":             `entry "10.0.0.1": no port`,
		"10.0.0.1:0":           `port "0"`,
		"10.0.0.1:70000":       `port "70000"`,
		"fd00::1:80":           "in brackets",
		"[10.0.0.1]:80":        "not an IPv6 address",
		"git.internal:80":      `"git.internal" is not an IPv4 address`,
		"0.0.0.0:80":           "not one host's address",
		"10.0.0.0/8:80":        "not an IPv4 address",
		"10.0.0.2:1,bad":       `entry "bad"`,
		"${attr.x}}:80":        "not an IPv4 address",
		"10.0.0.1:80,1.2.3.4:": `entry "1.2.3.4:"`,
	} {
		if _, err := ParseHostAllow(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}
