package sandboxinit_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// A task sandbox whose init could not fence it does not run, and its
// receipt says why: started as root without NET_ADMIN (iptables fails),
// or started as the sandbox user (nothing could fence it).
func TestTaskSandboxWithoutItsFenceDoesNotRun(t *testing.T) {
	img := testenv.SandboxImage(t)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"root without NET_ADMIN": {[]string{"--user", "0:0", "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "SETPCAP",
			"--security-opt", "no-new-privileges", "--env", dispatch.EnvTaskFence + "=1000:1000"}, "egress defaults could not be installed"},
		"started as the sandbox user": {[]string{"--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"}, dispatch.EnvTaskFence},
	} {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			if err := os.Chmod(out, 0o777); err != nil {
				t.Fatal(err)
			}
			o := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-7A5CF001", Mode: dispatch.ModeTask, Attempt: 1,
				Repo: "acme/demo", Number: 3, Config: sandboxcfg.MustResolve(sandboxcfg.Config{Mode: sandboxcfg.ModeTask}), OutputDir: "/sandbox/out"}
			raw, _ := json.Marshal(o)
			order := filepath.Join(t.TempDir(), "work-order.json")
			if err := os.WriteFile(order, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"run", "--rm"}, c.args...)
			args = append(args,
				"--mount", "type=bind,source="+order+",target=/sandbox/work-order.json,readonly",
				"--mount", "type=bind,source="+out+",target=/sandbox/out",
				"--env", dispatch.EnvWorkOrder+"=/sandbox/work-order.json",
				img, "--", "touch", "/sandbox/out/agent-ran")
			logs, err := dockerRun(t, args...)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
				t.Fatalf("exit = %v, want 3 (sandbox start failed)\n%s", err, logs)
			}
			r := readResult(t, out)
			if r.Status != dispatch.StatusFailed || r.Error == nil || !strings.Contains(r.Error.Message, c.want) {
				t.Errorf("receipt = %s %+v, want failed naming %q\n%s", r.Status, r.Error, c.want, logs)
			}
			if _, err := os.Stat(filepath.Join(out, "agent-ran")); err == nil {
				t.Error("the agent ran although nothing fenced it")
			}
		})
	}
}
