package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// procStat is what the profiles read of /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	// own is the process's CPU time (utime and stime), children that of
	// its children it has waited for (cutime and cstime).
	own, children time.Duration
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	f := strings.Fields(s[closing+2:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var t [4]int64
	for i := range t {
		t[i], _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	ppid, _ := strconv.Atoi(f[1])
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTick }
	return procStat{comm: s[open+1 : closing], ppid: ppid, own: tick(t[0] + t[1]), children: tick(t[2] + t[3])}, nil
}

// ProcessCPU is pid's own CPU time and that of the children it has
// waited for: for the bot, its own work and its docker CLI calls that
// ended.
func ProcessCPU(pid int) (own, children time.Duration, err error) {
	st, err := readStat(pid)
	return st.own, st.children, err
}

// EngineCPU is the CPU time of the host's Docker engine (dockerd and
// containerd, not the shims, which belong to containers). Every container
// on the engine shares it: on a machine where others use the engine, a
// difference of two readings counts their work too.
func EngineCPU() time.Duration {
	des, _ := os.ReadDir("/proc")
	var sum time.Duration
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && (st.comm == "dockerd" || st.comm == "containerd") {
			sum += st.own + st.children
		}
	}
	return sum
}

// LoadAverage is the one-minute load average, 0 when it cannot be read.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	load, _ := strconv.ParseFloat(f[0], 64)
	return load
}

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
	runtest.Git(t, "", "clone", "--quiet", gitDir, dir)
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
		Dir: dir, Prompt: prompt, Model: model.OpenCodeModel(), Env: append(runtest.HermeticEnv(home), "OPENCODE_CONFIG="+cfg), ReadOnly: true,
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

// WatchChildren notes the commands pid starts (its children, seen every
// 20 ms: the bot's docker CLI calls last longer) until the returned
// function is called, which counts them by their first two words
// ("docker logs").
func WatchChildren(pid int) func() map[string]int {
	seen := map[int]string{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			des, _ := os.ReadDir("/proc")
			for _, de := range des {
				child, err := strconv.Atoi(de.Name())
				if err != nil || seen[child] != "" {
					continue
				}
				if st, err := readStat(child); err != nil || st.ppid != pid {
					continue
				}
				cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
				words := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
				name := filepath.Base(words[0])
				for _, w := range words[1:] {
					if !strings.HasPrefix(w, "-") {
						name += " " + w
						break
					}
				}
				seen[child] = name
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]int {
		close(stop)
		<-done
		n := map[string]int{}
		for _, name := range seen {
			n[name]++
		}
		return n
	}
}
