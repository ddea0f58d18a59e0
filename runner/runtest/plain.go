package runtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// PlainRun is one plain `opencode run` on the host: the floor a sandboxed
// run is measured against.
type PlainRun struct {
	Wall, CPU time.Duration
}

// PlainOpenCode prepares a plain `opencode run` of prompt on the host,
// the way the harness starts OpenCode in a plan sandbox (read-only, the
// same permissions) against model, in a fresh clone of gitDir and a fresh
// HOME as a sandbox has, with what the image gives that HOME: a
// ~/.config/opencode the agent cannot write (else OpenCode starts an npm
// install of its plugin package there on every start, which no sandbox
// does). As root it runs as nobody, for whom the directory is read-only.
// Start runs it; the model's turns are the caller's to script.
func PlainOpenCode(t testing.TB, model *modeltest.Server, gitDir, prompt string) *exec.Cmd {
	t.Helper()
	bin := testenv.NPMBin(t, "opencode")
	base := t.TempDir()
	home, dir := filepath.Join(base, "home"), filepath.Join(base, "repo")
	Git(t, "", "clone", "--quiet", gitDir, dir)
	cfgDir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, ".gitignore"), []byte("node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"), 0o444); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.WriteOpenCodeConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := harness.NewOpenCode(bin).Command(harness.Request{
		Dir: dir, Prompt: prompt, Model: model.OpenCodeModel(), Env: append(HermeticEnv(home), "OPENCODE_CONFIG="+cfg), ReadOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(cfgDir, 0o555); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	// nobody owns the HOME and the checkout, root the config directory.
	const nobody = 65534
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, root := range []string{home, dir} {
		err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
			if err != nil || p == cfgDir || strings.HasPrefix(p, cfgDir+"/") {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// RunPlain runs cmds (PlainOpenCode's) at once and returns the time to
// the last exit and their CPU time in all (each process's own and its
// children's, from the kernel's accounting when it was waited for).
func RunPlain(t testing.TB, cmds ...*exec.Cmd) PlainRun {
	t.Helper()
	outs := make([]strings.Builder, len(cmds))
	start := time.Now()
	for i, cmd := range cmds {
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var r PlainRun
	for i, cmd := range cmds {
		err := cmd.Wait()
		if err != nil {
			t.Fatalf("plain opencode run on the host: %v\n%s", err, outs[i].String())
		}
		r.CPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	r.Wall = time.Since(start)
	return r
}

// PromptOf is the prompt of the first run model served at or after since:
// the first user message of its first scripted request.
func PromptOf(model *modeltest.Server, since time.Time) string {
	for _, r := range model.ScriptedRequests() {
		if r.Time.Before(since) {
			continue
		}
		for _, m := range r.Messages {
			if m.Role == "user" {
				return m.Content
			}
		}
	}
	return ""
}
