package dispatch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The store reads a plan run's archive as the sandbox's untrusted output:
// a link (to the bot's own files) or an oversized file is refused, a run
// without one is no error, and what is kept outlives the run's directory.
func TestSessionFilesKeepAndHandOver(t *testing.T) {
	t.Parallel()
	tasks := t.TempDir()
	out := func(id string) string { return filepath.Join(tasks, id, "out") }
	s := &dispatch.SessionFiles{Dir: filepath.Join(t.TempDir(), "sessions"), OutputDir: out}
	ctx := context.Background()
	write := func(id string, f func(p string) error) {
		t.Helper()
		os.MkdirAll(out(id), 0o755)
		if err := f(filepath.Join(out(id), dispatch.SessionArchiveFile)); err != nil {
			t.Fatal(err)
		}
	}
	write("T-00000001", func(p string) error { return os.WriteFile(p, []byte("archive"), 0o644) })
	if kept, err := s.KeepSession(ctx, "T-00000001"); !kept || err != nil {
		t.Fatalf("keep: %v, %v", kept, err)
	}
	os.RemoveAll(filepath.Join(tasks, "T-00000001")) // the run's cleanup
	if b, err := s.KeptSession(ctx, "T-00000001"); err != nil || string(b) != "archive" {
		t.Fatalf("kept session = %q, %v", b, err)
	}

	os.MkdirAll(out("T-00000002"), 0o755)
	if kept, err := s.KeepSession(ctx, "T-00000002"); kept || err != nil {
		t.Fatalf("a run without a session: kept %v, err %v", kept, err)
	}
	if _, err := s.KeptSession(ctx, "T-00000002"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("no session kept: err = %v, want ErrNotFound", err)
	}

	secret := filepath.Join(t.TempDir(), "bot-secret")
	os.WriteFile(secret, []byte("private key"), 0o600)
	write("T-00000003", func(p string) error { return os.Symlink(secret, p) })
	write("T-00000004", func(p string) error { return os.WriteFile(p, make([]byte, dispatch.MaxSessionArchiveBytes+1), 0o644) })
	for _, id := range []string{"T-00000003", "T-00000004"} {
		if kept, err := s.KeepSession(ctx, id); kept || !errors.Is(err, dispatch.ErrBadSession) {
			t.Errorf("%s: kept %v, err %v, want ErrBadSession", id, kept, err)
		}
	}
	if _, err := s.KeptSession(ctx, "../../etc/passwd"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("a path for a task id: err = %v", err)
	}
}
