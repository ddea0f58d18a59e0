package nomad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// conformanceRunner plays the sandbox on the fake agent, one behaviour per
// task: it reads the work order the job's template rendered, prints the
// agent stage, waits for its release, and leaves the receipt the behaviour
// asks for; stopped (the job deregistered), it writes an interrupted one.
type conformanceRunner struct {
	runs     backendtest.Behaviors
	mu       sync.Mutex
	released map[string]chan struct{}
}

func (r *conformanceRunner) gate(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.released[id]
	if !ok {
		ch = make(chan struct{})
		r.released[id] = ch
	}
	return ch
}

func (r *conformanceRunner) Run(ctx context.Context, t *nomadtest.Task) (int, error) {
	order, err := renderedWorkOrder(t)
	if err != nil {
		return 1, err
	}
	be := r.runs.Of(order.TaskID)
	line, _ := json.Marshal(dispatch.Progress{Event: "progress", TaskID: order.TaskID, Stage: "agent", Message: "agent started"})
	fmt.Fprintf(t.Stdout, "%s\n", line)
	receipt := func(status dispatch.Status) error {
		return dispatch.WriteResult(filepath.Join(t.AllocDir, "data"), &dispatch.Result{TaskID: order.TaskID, Mode: order.Mode, Status: status, Branch: order.TargetBranch})
	}
	select {
	case <-r.gate(order.TaskID):
	case <-ctx.Done():
		if be == backendtest.NoReceipt {
			return 137, nil
		}
		return 143, receipt(dispatch.StatusInterrupted)
	}
	if be == backendtest.NoReceipt {
		return 1, nil
	}
	return 0, receipt(dispatch.StatusCompleted)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) backendtest.Harness {
		r := &conformanceRunner{released: map[string]chan struct{}{}}
		e := newEnv(t, nomadtest.Options{Driver: r})
		b := e.backend()
		return backendtest.Harness{
			Backend:  b,
			Progress: true,
			Spec: func(be backendtest.Behavior) dispatch.RunSpec {
				var s dispatch.RunSpec
				r.runs.Add(be, func(n int) string {
					s = spec(dispatch.ModeExecute, fmt.Sprintf("conformance-%d", n))
					return s.Order.TaskID
				})
				return s
			},
			Release: func(id string) {
				ch := r.gate(id)
				r.mu.Lock()
				defer r.mu.Unlock()
				select {
				case <-ch:
				default:
					close(ch)
				}
			},
			Token: func(id string) (string, bool) {
				v := e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(nomad.JobID(nomad.DefaultJobPrefix, id, dispatch.ModeExecute)))
				if v == nil {
					return "", false
				}
				return v.Items[nomad.TokenItem], true
			},
		}
	})
}
