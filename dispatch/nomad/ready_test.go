package nomad_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// runtimesNode is a node whose engine has the given runtimes, as Nomad's
// docker driver fingerprints them; it runs nothing.
type runtimesNode string

func (runtimesNode) Run(context.Context, *nomadtest.Task) (int, error) {
	return 1, errors.New("runs nothing")
}

func (r runtimesNode) Fingerprint() (map[string]string, error) {
	return map[string]string{"driver.docker.runtimes": string(r)}, nil
}

// The gvisor profile is ready only where a node's engine has gVisor's
// runtime, and says what to do where none has.
func TestReadyForGVisorNeedsTheRuntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		runtimes string
		ready    bool
	}{
		{"io.containerd.runc.v2,runc", false},
		{"io.containerd.runc.v2,runc,runsc", true},
		{"runsc-debug", false},
	} {
		e := newEnv(t, nomadtest.Options{Driver: runtimesNode(tc.runtimes)})
		b := e.backend(func(o *nomad.Options) { o.NodePool, o.Isolation = "default", dispatch.IsolationGVisor })
		errs := b.Ready(ctxT(t))
		if tc.ready != (len(errs) == 0) {
			t.Errorf("runtimes %s: Ready = %v, want ready %v", tc.runtimes, errs, tc.ready)
			continue
		}
		if !tc.ready && (!errors.Is(errs[0], dispatch.ErrIsolationRefused) || !strings.Contains(errs[0].Error(), "allow_runtimes")) {
			t.Errorf("runtimes %s: %v, want ErrIsolationRefused naming allow_runtimes", tc.runtimes, errs[0])
		}
	}
}
