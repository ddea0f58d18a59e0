package nomad_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// artifactsRun submits a task run whose "sandbox" (leave) writes into the
// allocation's data directory, waits for its end and reads its artifacts.
func artifactsRun(t *testing.T, trigger string, leave func(data, taskDir string) error) *dispatch.Artifacts {
	t.Helper()
	e := newEnv(t, nomadtest.Options{Driver: leaving(leave)})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeTask, trigger)
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(ctx, s.Order.TaskID, nil); err != nil {
		t.Fatal(err)
	}
	arts, err := b.Artifacts(ctx, s.Order.TaskID, dispatch.ArtifactCaps{FileBytes: 1 << 20, TotalBytes: 4 << 20, MaxFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	return arts
}

// leaving is a driver whose "sandbox" calls leave with the allocation's
// data directory and its task directory, then writes a completed receipt.
func leaving(leave func(data, taskDir string) error) nomadtest.Driver {
	return nomadtest.DriverFunc(func(_ context.Context, task *nomadtest.Task) (int, error) {
		order, err := renderedWorkOrder(task)
		if err != nil {
			return 1, err
		}
		data := filepath.Join(task.AllocDir, "data")
		if err := leave(data, task.TaskDir); err != nil {
			return 1, err
		}
		return 0, dispatch.WriteResult(data, &dispatch.Result{TaskID: order.TaskID, Mode: order.Mode, Status: dispatch.StatusCompleted})
	})
}

// On Nomad the bot reads artifacts through the client's fs ls and fs cat:
// a link to the task's secrets (inside the allocation directory, where the
// client would follow it) and a link to a directory are named, not read;
// a pipe and a file over the cap are skipped.
func TestNomadArtifacts(t *testing.T) {
	t.Parallel()
	arts := artifactsRun(t, "artifacts", func(data, taskDir string) error {
		dir := filepath.Join(data, dispatch.ArtifactsDir)
		for p, c := range map[string]string{"report.md": "# ok\n", "sub/data.bin": "\x00\x01"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
				return err
			}
		}
		if err := os.Symlink(filepath.Join(taskDir, "secrets", "token"), filepath.Join(dir, "token")); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join(taskDir, "secrets"), filepath.Join(dir, "secrets")); err != nil {
			return err
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 2<<20), 0o644)
	})
	got := map[string]string{}
	for _, f := range arts.Files {
		got[f.Path] = string(f.Data)
	}
	if len(got) != 2 || got["report.md"] != "# ok\n" || got["sub/data.bin"] != "\x00\x01" {
		t.Errorf("read %q; want report.md and sub/data.bin", got)
	}
	skipped := map[string]string{}
	for _, s := range arts.Skipped {
		skipped[s.Path] = s.Reason
	}
	want := map[string]string{"token": dispatch.SkipSymlink, "secrets": dispatch.SkipSymlink, "pipe": dispatch.SkipNotRegular, "big.bin": dispatch.SkipFileCap}
	for p, r := range want {
		if skipped[p] != r {
			t.Errorf("%s skipped as %q; want %q (all %v)", p, skipped[p], r, skipped)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v; want %v", skipped, want)
	}
}

// An artifacts directory that is a link, or a run that made none, gives
// nothing to read.
func TestNomadArtifactsDirectoryLinkOrMissing(t *testing.T) {
	t.Parallel()
	arts := artifactsRun(t, "link", func(data, taskDir string) error {
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		return os.Symlink(filepath.Join(taskDir, "secrets"), filepath.Join(data, dispatch.ArtifactsDir))
	})
	if len(arts.Files) != 0 || len(arts.Skipped) != 1 || arts.Skipped[0].Path != "." {
		t.Errorf("a linked artifacts directory gave %+v", arts)
	}
	arts = artifactsRun(t, "none", func(string, string) error { return nil })
	if len(arts.Files)+len(arts.Skipped) != 0 {
		t.Errorf("a run without artifacts gave %+v", arts)
	}
}
