package nomad_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// fakeSandboxImage builds nomadtest/fakesandbox statically and imports it as
// a one-file image, so the job the backend builds runs in a real container
// without a registry.
func fakeSandboxImage(t *testing.T) string {
	t.Helper()
	testenv.Docker(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakesandbox")
	build := exec.Command("go", "build", "-o", bin, "./nomadtest/fakesandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fakesandbox: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(exe)
	tag := "sandbox-bot/nomadtest-fakesandbox:" + hex.EncodeToString(sum[:6])
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return tag
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "fakesandbox", Mode: 0o755, Size: int64(len(exe))})
	tw.Write(exe)
	tw.Close()
	imp := exec.Command("docker", "import", "--change", `ENTRYPOINT ["/fakesandbox"]`, "-", tag)
	imp.Stdin = &buf
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return tag
}

// TestJobRunsInDocker runs the jobs BuildJob makes through the fake agent's
// DockerDriver on the real engine, with the caps profile (privileged
// containers are refused on these machines): templates rendered into the
// task directory, /var/lib/docker bound from it, progress from the
// container's stdout, result.json from /alloc/data, and on Cancel SIGTERM
// with the kill timeout for the interrupted receipt.
func TestJobRunsInDocker(t *testing.T) {
	image := fakeSandboxImage(t)
	e := newEnv(t, nomadtest.Options{Driver: nomadtest.DockerDriver{}})
	b := e.backend(func(o *nomad.Options) {
		o.Image = image
		o.Isolation = dispatch.IsolationCaps
		o.KillTimeout = 10 * time.Second
	})
	ctx := ctxT(t)

	t.Run("execute completes", func(t *testing.T) {
		s := spec(dispatch.ModeExecute, "docker-1")
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
		var steps []string
		st, err := b.Wait(ctx, s.Order.TaskID, func(p dispatch.Progress) { steps = append(steps, p.Message) })
		if err != nil {
			t.Fatal(err)
		}
		if st.State != dispatch.StateComplete || st.ExitCode != 0 {
			t.Fatalf("status %+v; logs:\n%s", st, e.logs.String())
		}
		if strings.Join(steps, ",") != "step 1,step 2,step 3,done" {
			t.Errorf("progress %q", steps)
		}
		res, err := b.Result(ctx, s.Order.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != dispatch.StatusCompleted || res.PRSummary != fmt.Sprintf("dind=1 isolation=caps token=%d bytes", len(testToken)) {
			t.Errorf("result %+v", res)
		}
		allocs := e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s))
		probe, err := os.ReadFile(filepath.Join(e.fake.AllocDir(allocs[0].ID), "sandbox", "docker-data", "probe"))
		if err != nil || string(probe) != s.Order.TaskID {
			t.Errorf("/var/lib/docker is not the task directory's docker-data: %q, %v", probe, err)
		}
	})

	t.Run("cancel gives the runner its SIGTERM", func(t *testing.T) {
		s := spec(dispatch.ModeRevise, "docker-2")
		s.Order.Task.Body = "hold until stopped"
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
		got := make(chan dispatch.Progress, 10)
		done := make(chan dispatch.RunStatus, 1)
		go func() {
			st, err := b.Wait(ctx, s.Order.TaskID, func(p dispatch.Progress) { got <- p })
			if err != nil {
				t.Error(err)
			}
			done <- st
		}()
		for p := range got {
			if p.Step == 3 {
				break
			}
		}
		if err := b.Cancel(ctx, s.Order.TaskID); err != nil {
			t.Fatal(err)
		}
		st := <-done
		if st.State != dispatch.StateComplete {
			t.Fatalf("a cancelled run that left its receipt is complete: %+v", st)
		}
		res, err := b.Result(ctx, s.Order.TaskID)
		if err != nil || res.Status != dispatch.StatusInterrupted {
			t.Fatalf("Result = %+v, %v", res, err)
		}
	})

	t.Run("task mode has no token and no inner daemon", func(t *testing.T) {
		s := spec(dispatch.ModeTask, "docker-3")
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
		st, err := b.Wait(ctx, s.Order.TaskID, nil)
		if err != nil || st.State != dispatch.StateComplete {
			t.Fatalf("Wait = %+v, %v", st, err)
		}
		res, err := b.Result(ctx, s.Order.TaskID)
		// Started as root with the fence's capabilities, run as the
		// agent's user (the fake does what the init does).
		if err != nil || res.PRSummary != "dind=0 isolation=none fence_uid0=true net_admin=true ran_as=1000" {
			t.Fatalf("Result = %+v, %v", res, err)
		}
		allocs := e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s))
		if _, err := os.Stat(filepath.Join(e.fake.AllocDir(allocs[0].ID), "sandbox", "docker-data")); !os.IsNotExist(err) {
			t.Errorf("task mode bound /var/lib/docker: %v", err)
		}
	})
}
