package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A run the engine reported ended is not asked about again: reading its
// result after Wait costs no docker call. Cleanup forgets it, so a run
// that is gone is gone.
func TestEndedRunIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "docker")
	script := `#!/bin/sh
echo "$1 $2" >>'` + calls + `'
if [ "$1 $2" = "container inspect" ]; then
	echo '[{"Name":"/sandbox-T-00000001-plan","State":{"Status":"exited","ExitCode":0,"StartedAt":"2026-01-01T00:00:00Z","FinishedAt":"2026-01-01T00:01:00Z"},"Config":{"Labels":{}}}]'
fi
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := unitBackend(t, func(o *Options) { o.Docker = fake })
	const task = "T-00000001"
	os.MkdirAll(b.OutputDir(task), 0o755)
	if err := writeJSON(filepath.Join(b.TaskDir(task), "meta.json"), record{Meta: dispatch.Meta{TaskID: task, Mode: dispatch.ModePlan}, Container: "sandbox-" + task + "-plan"}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := dispatch.WriteResult(b.OutputDir(task), &dispatch.Result{TaskID: task, Status: dispatch.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inspects := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "container inspect")
	}
	if st, err := b.Status(ctx, task); err != nil || st.State != dispatch.StateComplete {
		t.Fatalf("status = %+v, %v", st, err)
	}
	if r, err := b.Result(ctx, task); err != nil || r.Status != dispatch.StatusCompleted {
		t.Fatalf("result = %+v, %v", r, err)
	}
	if st, err := b.Status(ctx, task); err != nil || st.State != dispatch.StateComplete || st.Meta.TaskID != task {
		t.Fatalf("status again = %+v, %v", st, err)
	}
	if n := inspects(); n != 1 {
		t.Errorf("the engine was asked %d times about a run it reported ended, want once", n)
	}
	if err := b.Cleanup(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Status(ctx, task); err == nil {
		t.Error("a run cleaned up still has a status")
	}
}
