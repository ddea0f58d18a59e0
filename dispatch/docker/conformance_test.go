package docker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The real sandbox image on the real engine, with the real runner inside
// running a task-mode run (no inner daemon, no clone: the checks are about
// the backend). The agent waits for a release file in the output
// directory; a run that must leave no receipt is killed with docker kill.
func TestConformance(t *testing.T) {
	img := testenv.SandboxImage(t)
	// One check at a time: they share the engine, and each starts sandboxes.
	var engine sync.Mutex
	backendtest.Run(t, func(t *testing.T) backendtest.Harness {
		engine.Lock()
		t.Cleanup(engine.Unlock)
		// Container names come from task ids: ids seeded by the data
		// directory never meet another test run's on a shared engine.
		dataDir := t.TempDir()
		b, err := docker.New(docker.Options{
			Image:     img,
			Isolation: dispatch.IsolationCaps,
			DataDir:   dataDir,
			StopGrace: 30 * time.Second,
			Logger:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
		})
		if err != nil {
			t.Fatal(err)
		}
		var runs backendtest.Behaviors
		return backendtest.Harness{
			Backend:  b,
			Progress: true,
			Timeout:  4 * time.Minute,
			Spec: func(be backendtest.Behavior) dispatch.RunSpec {
				id := runs.Add(be, func(n int) string {
					return dispatch.NewTaskID("acme/demo", 7, dispatch.ModeTask, fmt.Sprintf("%s-%d", dataDir, n))
				})
				cfg := sandboxcfg.Config{Mode: sandboxcfg.ModeTask, Harness: "command", Command: `echo '{"type":"step_start"}'
while [ ! -e ` + dispatch.OutputDir + `/release ]; do sleep 0.1; done
echo Done.`}
				return dispatch.RunSpec{
					Meta: dispatch.Meta{TaskID: id, Mode: dispatch.ModeTask, Repo: "acme/demo", Number: 7, InstallationID: 1, Attempt: 1},
					Order: dispatch.WorkOrder{
						SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: dispatch.ModeTask, Attempt: 1,
						Task: dispatch.TaskText{Title: "Conformance", Body: "Wait for the release."}, Config: sandboxcfg.MustResolve(cfg), BudgetUSD: 1,
					},
					Token: "ghs_dockerConformanceToken00000000001",
				}
			},
			Release: func(id string) {
				if runs.Of(id) == backendtest.NoReceipt {
					if out, err := exec.Command("docker", "kill", "sandbox-"+id+"-"+string(dispatch.ModeTask)).CombinedOutput(); err != nil {
						t.Errorf("docker kill: %v: %s", err, out)
					}
					return
				}
				if err := os.WriteFile(filepath.Join(b.OutputDir(id), "release"), nil, 0o644); err != nil {
					t.Error(err)
				}
			},
			Token: func(id string) (string, bool) {
				tok, err := os.ReadFile(filepath.Join(b.TaskDir(id), "secrets", "token"))
				return string(tok), err == nil
			},
		}
	})
}
