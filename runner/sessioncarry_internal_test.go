package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// The restored session is the agent's: the import runs as the agent's uid
// into the agent's HOME, so the files are the agent's and private to it,
// not the runner's. Needs root to switch uids (the runner has
// CAP_SETUID in a sandbox).
func TestSessionRestoredWithTheAgentsOwnership(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("switching to the agent's uid needs root (the runner's CAP_SETUID in a sandbox)")
	}
	const uid, gid = 4242, 4242
	home := t.TempDir()
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(home), 0o755)
	agent := &AgentUser{Name: "agent", UID: uid, GID: gid, Home: home}
	r := &run{opts: Options{Agent: agent}, work: context.Background(), red: NewRedactor(""), log: zerolog.Nop()}

	c := harness.NewClaudeCode("claude")
	const id = "0b72ff7e-fe7c-4917-be58-b670cf474c21"
	oldDir, newDir := t.TempDir(), t.TempDir()
	export := claudeExport(t, id, oldDir)
	data, err := c.RelocateSession(export, id, oldDir, newDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := c.ImportSession([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, newDir, id, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.sessionCmd(cmd, 1<<20); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(home, ".claude", "projects", strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(newDir))
	for _, p := range []string{filepath.Join(home, ".claude"), proj, filepath.Join(proj, id+".jsonl")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s is owned by %d:%d, want the agent's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v, want private to the agent", p, fi.Mode().Perm())
		}
	}
	b, err := os.ReadFile(filepath.Join(proj, id+".jsonl"))
	if err != nil || !strings.Contains(string(b), `"cwd":"`+newDir+`"`) {
		t.Fatalf("transcript %q, %v", b, err)
	}

	// Exporting reads as the agent too, and a limit holds.
	cmd, err = c.ExportSession([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, newDir, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.sessionCmd(cmd, 100); err == nil || !strings.Contains(err.Error(), "more than 100 bytes") {
		t.Fatalf("export over the limit: err = %v", err)
	}
}

// claudeExport exports a transcript made in checkout from a CLAUDE_CONFIG_DIR.
func claudeExport(t *testing.T, id, checkout string) []byte {
	t.Helper()
	cfg := t.TempDir()
	proj := filepath.Join(cfg, "projects", strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(checkout))
	os.MkdirAll(proj, 0o700)
	os.WriteFile(filepath.Join(proj, id+".jsonl"), []byte(`{"cwd":"`+checkout+`"}`+"\n"), 0o600)
	r := &run{opts: Options{}, work: context.Background(), red: NewRedactor(""), log: zerolog.Nop()}
	c, err := harness.NewClaudeCode("claude").ExportSession([]string{"CLAUDE_CONFIG_DIR=" + cfg, "PATH=" + os.Getenv("PATH")}, checkout, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.sessionCmd(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
