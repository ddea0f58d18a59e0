package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// hostileAgent is a command-harness agent that does what a prompt-injected
// model or a dependency's install script would: it looks for credentials
// in every file it can read, in every process's environment and in its
// own, reports its capabilities and whether it can read the runner's
// environment, and tries to push to the base branch with whatever it
// found, with the checkout's own remote and with no credentials at all.
// It prints one report, which becomes the plan (plan mode) or the PR
// summary (execute mode). It matches the token and the canary by their
// shapes (GitHub's ghs_ prefix, the canary's prefix), as an attacker would.
const hostileAgent = `
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
UID $(id -u) GROUPS $(id -G)"
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

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A hostile agent, in a plan run and in an execute run on the real sandbox
// image: the token (delivered as the backend delivers it; a mid-run
// refresh through the moved directory is TestSandboxRunsATask's) and a canary secret given to the sandbox for
// the runner (GITHUB_TOKEN in its environment) are nowhere it can read,
// it holds no capability, the runner's /proc entries are closed to it,
// every push to the base branch is refused and main does not move; and the
// runner still pushes the run's own branch.
func TestHostileAgentFindsNoCredentials(t *testing.T) {
	canary := "canary-" + randomHex(t, 12)
	f := newFixture(t, func(o *docker.Options) {
		o.Env = map[string]string{"GITHUB_TOKEN": canary}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	mainBefore := f.remote.SHA(t, "main")

	for i, mode := range []dispatch.Mode{dispatch.ModePlan, dispatch.ModeExecute} {
		token := "ghs_" + randomHex(t, 18)
		f.git.SetToken(token)
		cfg := sandboxcfg.Config{Harness: "command", Command: hostileAgent,
			Env: map[string]string{"REMOTE_URL": f.git.URL}}
		if mode == dispatch.ModeExecute {
			cfg.Env["WRITE_FILE"] = "agent-work.txt"
		}
		id := "T-5A0D01" + string(rune('0'+i)) + "0"
		spec := f.spec(id, mode, cfg)
		spec.Token = token
		f.submit(t, ctx, spec)
		st := wait(ctx, f.b, id).result(t)
		res, err := f.b.Result(ctx, id)
		if err != nil {
			t.Fatalf("%s: result: %v (status %+v)", mode, err, st)
		}
		if res.Status != dispatch.StatusCompleted {
			t.Fatalf("%s: status %s: %+v", mode, res.Status, res.Error)
		}
		report := res.Plan
		if mode == dispatch.ModeExecute {
			report = res.PRSummary
		}
		t.Logf("%s run, the agent's report:\n%s", mode, report)
		for _, want := range []string{
			"HITS 0", "CapPrm 0000000000000000", "CapEff 0000000000000000", "CapAmb 0000000000000000",
			"CapInh 0000000000000000", "UID 1000", "RUNNER_ENVIRON_DENIED yes",
			"PUSH own-remote refused", "PUSH no-credentials refused",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("%s: the agent's report lacks %q", mode, want)
			}
		}
		// RUNNER_PIDS 0 would make the environ check vacuous.
		for _, bad := range []string{"ACCEPTED", "READABLE", "REDACTED", "found-credential", "RUNNER_PIDS 0\n", token, canary} {
			if strings.Contains(report, bad) {
				t.Errorf("%s: the agent's report holds %q", mode, bad)
			}
		}
		if got := f.remote.SHA(t, "main"); got != mainBefore {
			t.Fatalf("%s: main moved from %s to %s", mode, mainBefore, got)
		}
		log := sandboxLog(t, id, mode)
		if !strings.Contains(log, `"message":"runner and agent separated"`) {
			t.Errorf("%s: the init did not separate the runner from the agent", mode)
		}
		if strings.Contains(log, token) || strings.Contains(log, canary) {
			t.Errorf("%s: a secret reached the sandbox log", mode)
		}
		if mode == dispatch.ModeExecute {
			branch := spec.Order.TargetBranch
			if got, ok := f.remote.File(t, branch, "agent-work.txt"); !ok || strings.TrimSpace(got) != "work of the agent" {
				t.Fatalf("the runner did not push the run's branch %s: %q, %v", branch, got, ok)
			}
			if res.HeadSHA != f.remote.SHA(t, branch) {
				t.Errorf("head_sha %s, remote at %s", res.HeadSHA, f.remote.SHA(t, branch))
			}
		}
	}
}
