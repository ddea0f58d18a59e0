package dockertest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// KeySearch is a shell script for an agent's tool call in a sandbox: it
// searches, as the user running it, every file it can read, every
// /proc/*/environ it can read and its own environment for key, and counts
// where control (a secret that is the agent's by design) shows up, so a
// test can tell a search that finds nothing from one that cannot find. Both
// strings are written in two halves, so the script's own text (which an
// agent CLI stores in its session files) never holds either whole. It
// prints NAME:value lines and END; ParseSearch reads them.
func KeySearch(key, control string) string {
	k1, k2 := key[:len(key)/2], key[len(key)/2:]
	c1, c2 := control[:len(control)/2], control[len(control)/2:]
	return fmt.Sprintf(`a='%s'; b='%s'; k="$a$b"
c='%s'; d='%s'; p="$c$d"
echo "USER:$(id -un)"
echo "FILES:[$(grep -rlsIF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "$k" / 2>/dev/null | tr '\n' ' ')]"
echo "SCANNED:$(find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -readable -print 2>/dev/null | wc -l)"
echo "ENVIRON:[$(for f in /proc/[0-9]*/environ; do grep -lsaF -e "$k" "$f"; done | tr '\n' ' ')]"
echo "ENV:$(env | grep -cF -e "$k")"
echo "CONTROL_ENV:$(env | grep -cF -e "$p")"
echo "CONTROL_ENVIRON:$(for f in /proc/[0-9]*/environ; do grep -lsaF -e "$p" "$f"; done | wc -l)"
g=""; for d in /sandbox/secrets/gateway /secrets/gateway; do [ -d "$d" ] && g="$g$(ls -A "$d" 2>&1)"; done; echo "GATEWAY_DIR:[$g]"
echo "GATEWAY:$SANDBOX_MODEL_GATEWAY"
echo "END"`, k1, k2, c1, c2)
}

// ParseSearch reads KeySearch's output; ok is false when it did not run to
// its end.
func ParseSearch(out string) (fields map[string]string, ok bool) {
	fields = map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if l == "END" {
			ok = true
		}
		if k, v, found := strings.Cut(l, ":"); found && k == strings.ToUpper(k) && !strings.Contains(k, " ") {
			if _, dup := fields[k]; !dup {
				fields[k] = v
			}
		}
	}
	return fields, ok
}

// CheckSearch fails t unless KeySearch's output shows a complete search,
// run as the sandbox user, that found the key nowhere, found the control
// where it belongs, saw the gateway's directory empty (hidden by the init)
// and the gateway's address in the environment.
func CheckSearch(t testing.TB, key, out string) {
	t.Helper()
	t.Logf("the agent's search:\n%s", out)
	if strings.Contains(out, key) {
		t.Fatal("the agent's search output holds the key")
	}
	f, ok := ParseSearch(out)
	if !ok {
		t.Fatalf("the search did not run to its end:\n%s", out)
	}
	for name, want := range map[string]string{
		"USER": "sandbox", "FILES": "[]", "ENVIRON": "[]", "ENV": "0", "GATEWAY_DIR": "[]",
	} {
		if got, found := f[name]; !found || got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if n, _ := strconv.Atoi(f["CONTROL_ENV"]); n == 0 {
		t.Error("the control failed: the agent's own secret is not in its environment, so the search proves nothing")
	}
	if n, _ := strconv.Atoi(f["CONTROL_ENVIRON"]); n == 0 {
		t.Error("the control failed: the agent's own secret is in no /proc/*/environ it read, so the search proves nothing")
	}
	if n, _ := strconv.Atoi(f["SCANNED"]); n < 1000 {
		t.Errorf("the agent could read only %s files: the search proves little", f["SCANNED"])
	}
	if !strings.HasPrefix(f["GATEWAY"], "http://127.0.0.1:") {
		t.Errorf("SANDBOX_MODEL_GATEWAY = %q", f["GATEWAY"])
	}
}
