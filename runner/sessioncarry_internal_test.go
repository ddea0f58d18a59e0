package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
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
	r := &sessions{agent: agent, red: NewRedactor(""), log: zerolog.Nop()}

	c := harness.NewClaudeCode("claude")
	const id = "0b72ff7e-fe7c-4917-be58-b670cf474c21"
	oldDir, newDir := t.TempDir(), t.TempDir()
	export := claudeExport(t, id, oldDir)
	cmd, err := c.ImportSession([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, id, oldDir, newDir, export)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cmd(context.Background(), cmd, 1<<20); err != nil {
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
	if _, err := r.cmd(context.Background(), cmd, 100); err == nil || !strings.Contains(err.Error(), "more than 100 bytes") {
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
	r := &sessions{red: NewRedactor(""), log: zerolog.Nop()}
	c, err := harness.NewClaudeCode("claude").ExportSession([]string{"CLAUDE_CONFIG_DIR=" + cfg, "PATH=" + os.Getenv("PATH")}, checkout, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd(context.Background(), c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// OpenCode's session, the same way: the runner's own helper, started as
// the agent's uid, makes the plan's database the agent's database in the
// run's agent-private directory, and copies it out again as the agent.
// Needs root to switch uids.
func TestOpenCodeSessionRestoredWithTheAgentsOwnership(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("switching to the agent's uid needs root (the runner's CAP_SETUID in a sandbox)")
	}
	const uid, gid = 4243, 4243
	// The helper as the image has it: a binary every user may run.
	// Copied by cp, not written here: a file this process holds open for
	// writing is inherited by whatever another parallel test forks at that
	// moment, and exec then fails with "text file busy".
	bin := filepath.Join(t.TempDir(), "sandbox-runner")
	if out, err := exec.Command("cp", testenv.BuildCommand(t, "sandbox-runner"), bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin)), state, filepath.Dir(state)} {
		os.Chmod(d, 0o755)
	}
	agent := &AgentUser{Name: "agent", UID: uid, GID: gid, Home: state}
	r := &sessions{agent: agent, stateDir: state, red: NewRedactor(""), log: zerolog.Nop()}
	db, err := openCodeDB(state, agent)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), harness.EnvOpenCodeDB + "=" + db}
	o := harness.NewOpenCode("opencode")
	o.Helper = bin
	newDir := t.TempDir()
	cmd, err := o.ImportSession(env, "ses_1", "/old/repo", newDir, planDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cmd(context.Background(), cmd, 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(db), db} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v, owned by %d:%d, want the agent's %d:%d and private to it", p, fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
		}
	}
	cmd, err = o.ExportSession(env, newDir, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd(context.Background(), cmd, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, text, err := o.SessionData(out)
	if err != nil || !strings.Contains(string(text), `"cwd":"`+newDir+`"`) {
		t.Fatalf("exported text %q, %v", text, err)
	}
}

// planDatabase is a database with session ses_1 made in /old/repo,
// shaped as OpenCode keeps one: a file, so that this package's tests link
// no SQLite (runner/harness/ocdb's TestTheRunnersFixtureIsAPlanSession
// checks it and writes it again).
func planDatabase(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "plan-session.db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
