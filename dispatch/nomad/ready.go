package nomad

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// readiness tells whether the cluster can take a sandbox
// (dispatch.ReadinessChecker).
type readiness struct {
	*cluster
}

// Ready implements dispatch.ReadinessChecker: Nomad answers, the namespace
// sandboxes run in exists, and the node pool sandboxes go to has a ready, eligible node with a healthy docker
// driver; for the privileged profile, one whose docker plugin allows
// privileged containers; for the gvisor profile, one whose engine has
// gVisor's runtime. Whether the sandbox image is on the nodes Nomad
// cannot say before a run: a missing image shows as a failed allocation.
func (b *readiness) Ready(ctx context.Context) []error {
	if _, _, err := b.c.Namespaces().Info(b.o.Namespace, b.qopts(ctx)); err != nil {
		return []error{fmt.Errorf("nomad backend: the namespace sandboxes run in, %q, is not there or this token may not use it "+
			"(create it with `nomad namespace apply deploy/nomad/sandbox.namespace.hcl`, or name another with SANDBOX_NOMAD_NAMESPACE): %w", b.o.Namespace, err)}
	}
	pool := b.o.NodePool
	if pool == "" {
		pool = "default"
	}
	stubs, _, err := b.c.Nodes().List(b.qopts(ctx))
	if err != nil {
		return []error{fmt.Errorf("nomad backend: list nodes at %s (%w): %w", b.c.Address(), dispatch.ErrUnavailable, err)}
	}
	var ready []*api.NodeListStub
	for _, n := range stubs {
		if n.NodePool != pool && pool != "all" || n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible || n.Drain {
			continue
		}
		if d := n.Drivers["docker"]; d != nil && !d.Healthy {
			continue
		}
		ready = append(ready, n)
	}
	if len(ready) == 0 {
		return []error{fmt.Errorf("nomad backend: no ready, eligible node with a healthy docker driver in node pool %q (%d nodes listed)", pool, len(stubs))}
	}
	var accepts func(attrs map[string]string) bool
	var refusal string
	switch b.o.Isolation {
	case dispatch.IsolationPrivileged:
		accepts = func(a map[string]string) bool {
			v := a["driver.docker.privileged.enabled"]
			return v == "1" || v == "true"
		}
		refusal = "allows privileged containers (docker plugin allow_privileged; %w); set SANDBOX_ISOLATION=caps with allow_caps = [\"all\"] instead"
	case dispatch.IsolationGVisor:
		accepts = func(a map[string]string) bool {
			return slices.Contains(strings.Split(a[runtimesAttribute], ","), dispatch.GVisorRuntime)
		}
		refusal = "has gVisor's runtime " + dispatch.GVisorRuntime + " in its Docker engine (%w); register it on the engine (runtimeArgs --net-raw) " +
			"and list it in the docker plugin's allow_runtimes (deploy/nomad/client.hcl)"
	default:
		return nil
	}
	for _, n := range ready {
		node, _, err := b.c.Nodes().Info(n.ID, b.qopts(ctx))
		if err != nil {
			return []error{fmt.Errorf("nomad backend: read node %s: %w", n.ID, err)}
		}
		if accepts(node.Attributes) {
			return nil
		}
	}
	return []error{fmt.Errorf("nomad backend: no ready node in pool %q "+refusal, pool, dispatch.ErrIsolationRefused)}
}
