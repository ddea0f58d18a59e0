package backendtest_test

import (
	"fmt"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// The in-memory backend stands in for the real ones in the handler tests,
// so it must keep the same contract.
func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, func(t *testing.T) backendtest.Harness {
		b := backendtest.NewMemory()
		var runs backendtest.Behaviors
		return backendtest.Harness{
			Backend: b,
			Spec: func(be backendtest.Behavior) dispatch.RunSpec {
				id := runs.Add(be, func(n int) string { return dispatch.NewTaskID("acme/web", 42, dispatch.ModeExecute, fmt.Sprint(n)) })
				return dispatch.RunSpec{
					Meta: dispatch.Meta{TaskID: id, Mode: dispatch.ModeExecute, Repo: "acme/web", Number: 42, Attempt: 1},
					Order: dispatch.WorkOrder{
						SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: dispatch.ModeExecute, Attempt: 1,
						Repo: "acme/web", Number: 42, CloneURL: "https://github.com/acme/web.git", BaseBranch: "main",
						TargetBranch: dispatch.BranchName(id, "Conformance"), Plan: "1. Hold.",
						Task: dispatch.TaskText{Title: "Conformance"},
					},
					Token: "ghs_memoryConformanceToken00000000001",
				}
			},
			// The memory backend has no runner: Release plays its end.
			Release: func(id string) {
				if runs.Of(id) == backendtest.NoReceipt {
					b.Finish(id, nil)
					return
				}
				b.Finish(id, &dispatch.Result{TaskID: id, Mode: dispatch.ModeExecute, Status: dispatch.StatusCompleted})
			},
			Token: func(id string) (string, bool) {
				if _, ok := b.Spec(id); !ok {
					return "", false
				}
				toks := b.Tokens(id)
				if len(toks) == 0 {
					return "", false
				}
				return toks[len(toks)-1], true
			},
		}
	})
}
