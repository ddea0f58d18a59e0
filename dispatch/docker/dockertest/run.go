package dockertest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// RunToEnd submits spec to b, waits for the sandbox to end and returns its
// receipt; the container is removed when the test ends, after its log tail
// is logged if the test failed.
func RunToEnd(ctx context.Context, t testing.TB, b dispatch.Backend, spec dispatch.RunSpec) *dispatch.Result {
	t.Helper()
	id := spec.Order.TaskID
	if created, err := b.Submit(ctx, spec); err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	container := "sandbox-" + id + "-" + strings.ToLower(string(spec.Order.Mode))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", "--tail", "80", container).CombinedOutput()
			t.Logf("sandbox log tail:\n%s", out)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := b.Cleanup(cctx, id); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	st, err := b.Wait(ctx, id, func(dispatch.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Result(ctx, id)
	if err != nil {
		t.Fatalf("no result (state %+v): %v", st, err)
	}
	return res
}

// PlanSpec is a plan run of acme/demo#7 (installation 1) cloning from
// cloneURL with the token tok-1, as the sandbox tests and benchmarks
// start it; cfg is resolved on its own.
func PlanSpec(id, cloneURL string, task dispatch.TaskText, cfg sandboxcfg.Config) dispatch.RunSpec {
	return dispatch.RunSpec{
		Meta: dispatch.Meta{TaskID: id, Mode: dispatch.ModePlan, Repo: "acme/demo", Number: 7, InstallationID: 1, Attempt: 1},
		Order: dispatch.WorkOrder{
			SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: dispatch.ModePlan, Attempt: 1,
			Repo: "acme/demo", Number: 7, CloneURL: cloneURL, BaseBranch: "main",
			Task: task, Config: sandboxcfg.MustResolve(cfg), BudgetUSD: 5,
		},
		Token: "tok-1",
	}
}
