package process_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// The real sandbox-runner runs each check's task with the command harness:
// the agent is a script that waits for a release file, so the check decides
// when the run ends; a run that must leave no receipt has its runner
// killed, as a lost machine would.
func TestConformance(t *testing.T) {
	t.Parallel()
	runner := runnerBin(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Harness {
		remote := runtest.NewRemote(t, map[string]string{"README.md": "hi\n"})
		b, _ := newBackend(t, runner, t.TempDir())
		release := t.TempDir()
		var runs backendtest.Behaviors
		return backendtest.Harness{
			Backend:  b,
			Progress: true,
			Spec: func(be backendtest.Behavior) dispatch.RunSpec {
				id := runs.Add(be, func(n int) string {
					return dispatch.NewTaskID("acme/calc", 3, dispatch.ModeExecute, fmt.Sprintf("%s-%d", t.Name(), n))
				})
				s := spec(remote.URL, fmt.Sprintf(`echo '{"type":"step_start"}'
while [ ! -e %q ]; do sleep 0.05; done
echo notes > NOTES.md
echo Done.`, filepath.Join(release, id)))
				s.Meta.TaskID, s.Order.TaskID = id, id
				s.Order.TargetBranch = dispatch.BranchName(id, "Notes")
				s.Order.Config.Validate = sandboxcfg.Checks{}
				return s
			},
			Release: func(id string) {
				if runs.Of(id) == backendtest.NoReceipt {
					killRunner(t, b, id)
				}
				// Also after the kill: the release file ends the agent's
				// loop even if the agent outlived its runner.
				if err := os.WriteFile(filepath.Join(release, id), nil, 0o644); err != nil {
					t.Error(err)
				}
			},
			Token: func(id string) (string, bool) {
				tok, err := os.ReadFile(filepath.Join(b.TaskDir(id), "secrets", "token"))
				return string(tok), err == nil
			},
			Timeout: 3 * time.Minute,
		}
	})
}

// killRunner SIGKILLs the run's process group: the runner gets no chance
// to write a receipt.
func killRunner(t *testing.T, b *process.Backend, id string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.TaskDir(id), "meta.json"))
	if err != nil {
		t.Fatalf("meta.json of %s: %v", id, err)
	}
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.PID <= 0 {
		t.Fatalf("meta.json of %s: pid %d, %v", id, m.PID, err)
	}
	if err := syscall.Kill(-m.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the runner of %s (pid %d): %v", id, m.PID, err)
	}
}
