package dockertest

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// HostileProfiles are the isolation profiles the hostile-agent tests run
// under: caps (what these machines' kernels accept of a container with an
// inner daemon) and gvisor (the same, behind gVisor's kernel).
var HostileProfiles = []dispatch.Isolation{dispatch.IsolationCaps, dispatch.IsolationGVisor}

// Profile requires what iso needs on this engine (gVisor's runtime for
// gvisor: testenv.Runsc) and returns its docker run flags, the docker
// backend's own.
func Profile(t testing.TB, iso dispatch.Isolation) []string {
	t.Helper()
	if iso == dispatch.IsolationGVisor {
		testenv.Runsc(t)
	}
	return docker.IsolationArgs(iso)
}

// ForEachProfile runs f as a subtest per hostile profile, named after it.
func ForEachProfile(t *testing.T, f func(t *testing.T, iso dispatch.Isolation)) {
	t.Helper()
	for _, iso := range HostileProfiles {
		t.Run(string(iso), func(t *testing.T) {
			Profile(t, iso)
			f(t, iso)
		})
	}
}

// SandboxRules is `iptables -S` of a running sandbox container, read from
// the host as root with the tools its init picked: the image's default
// iptables, or iptables-legacy behind gVisor (netfilter.go in
// runner/sandboxinit).
func SandboxRules(t testing.TB, container string) string {
	t.Helper()
	out, err := exec.Command("docker", "exec", container, "sh", "-c", "iptables -S 2>/dev/null || iptables-legacy -S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S in %s: %v: %s", container, err, out)
	}
	return string(out)
}

// ForwardChain is where the fences hold the inner containers' IPv4
// traffic from under iso: DOCKER-USER when the inner dockerd writes its
// own rules, FORWARD behind gVisor, where it runs with --iptables=false.
func ForwardChain(iso dispatch.Isolation) string {
	if iso == dispatch.IsolationGVisor {
		return "FORWARD"
	}
	return "DOCKER-USER"
}

// ownerMatch is an owner match as iptables-save prints it.
var ownerMatch = regexp.MustCompile(`-m owner --(uid|gid)-owner \d+`)

// Rule is rule as SandboxRules shows it under iso: its DOCKER-USER jumps
// from ForwardChain, and behind gVisor its owner match without the uid or
// gid, which iptables-legacy cannot read back from gVisor's netstack
// ("[unsupported revision]"; the match itself works, which the tests'
// refused connections show).
func Rule(iso dispatch.Isolation, rule string) string {
	rule = strings.Replace(rule, "-A DOCKER-USER ", "-A "+ForwardChain(iso)+" ", 1)
	if iso == dispatch.IsolationGVisor {
		rule = ownerMatch.ReplaceAllString(rule, "-m owner [unsupported revision]")
	}
	return rule
}
