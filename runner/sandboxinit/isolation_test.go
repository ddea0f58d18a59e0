package sandboxinit

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A sandbox started for the gvisor profile on a runtime that only bears
// runsc's name (the host's kernel answers) does not run; the other
// profiles, and gVisor's own kernel, go on.
func TestGVisorProfileNeedsGVisorsKernel(t *testing.T) {
	t.Parallel()
	env := func(iso string) func(string) string {
		return func(k string) string {
			if k == dispatch.EnvIsolation {
				return iso
			}
			return ""
		}
	}
	if err := checkIsolation(env("gvisor"), "6.1.0-18-amd64"); err == nil || !strings.Contains(err.Error(), "not gVisor") {
		t.Errorf("gvisor profile on the host's kernel: %v, want a refusal", err)
	}
	for _, c := range []struct{ iso, kernel string }{{"gvisor", "4.4.0-gvisor"}, {"caps", "6.1.0-18-amd64"}, {"", "6.1.0"}, {"privileged", "6.1.0"}} {
		if err := checkIsolation(env(c.iso), c.kernel); err != nil {
			t.Errorf("%q on %q: %v", c.iso, c.kernel, err)
		}
	}
}
