package sandboxinit

import (
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// checkIsolation refuses to go on when the backend asked for the gvisor
// profile and the kernel is not gVisor's. Nomad places the job on a node
// whose docker plugin lists a runtime named runsc, and the bot's readiness
// check only sees that name: a node where the name points at runc would
// run the sandbox with the profile's grants (every capability, seccomp
// unconfined) on the host's own kernel. The init sees its kernel and is
// the last place to say no.
func checkIsolation(getenv func(string) string, release string) error {
	if dispatch.Isolation(getenv(dispatch.EnvIsolation)) != dispatch.IsolationGVisor || dispatch.GVisorKernel(release) {
		return nil
	}
	return fmt.Errorf("the sandbox was started for the gvisor profile but runs on the kernel %q, not gVisor's: "+
		"the engine's runtime %q is not gVisor (register runsc itself under that name, with --net-raw and --host-uds=create), "+
		"and with this profile's grants the sandbox would hold the host's kernel", release, dispatch.GVisorRuntime)
}
