package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// TestPlanRunCPU is a plan run's whole CPU cost through the bot (issue 33),
// beside the agent's own: the real bot binary on the docker backend, the
// real image, OpenCode on a scripted two-step plan (a shell call, then the
// plan), alternating with one plain `opencode run` of the same conversation
// on the host (the prompt the sandbox's agent got, the same two turns, a
// fresh HOME as a sandbox has). A plan run's CPU is the sandbox
// container's cgroup (every process in it, by process in the table), its
// containerd shim on the host, and the bot's own process with the docker
// CLI calls it made for the run; the Docker engine's (dockerd, containerd)
// is printed beside it and not counted, since every container on the
// engine shares it. Hand-run; nothing is asserted on the figures:
//
//	SANDBOX_CPUPROFILE=1 go test -count=1 -timeout 60m -run TestPlanRunCPU -v ./cmd/sandbox-bot/
//
// SANDBOX_CPUPROFILE_ROUNDS sets the rounds (3). A round taken above a
// load average of the machine's core count is marked and left out of the
// result.
func TestPlanRunCPU(t *testing.T) {
	if os.Getenv("SANDBOX_CPUPROFILE") == "" {
		t.Skip("hand-run profile: set SANDBOX_CPUPROFILE=1")
	}
	rounds := envInt("SANDBOX_CPUPROFILE_ROUNDS", 3)
	l := startLoop(t, loopOptions{repoFiles: startRepo(false, nil), env: productionLike()})
	gitDir := l.gh.Repo(e2eRepo).GitDir
	var ratios []float64
	for i := 1; i <= rounds; i++ {
		n := l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Document add.sh %d", i), "Say what add.sh does.")
		l.model.Append(twoStepPlan()...)
		load0 := settle(t)
		prof := dockertest.ProfileNextContainer(t, "label=org.sandbox-bot.data-dir="+l.dataDir, "label=org.sandbox-bot.number="+strconv.Itoa(n))
		bot0, eng0 := l.botCPU(), dockertest.EngineCPU()
		calls := dockertest.WatchChildren(l.bot.cmd.Process.Pid)
		t0 := time.Now()
		l.label(n)
		l.waitComment(n, "## 📋 Plan", 15*time.Minute)
		l.waitFollowed(0, 5*time.Minute)
		wall := time.Since(t0)
		rep := prof.Report()
		started := calls()
		bot1 := l.botCPU()
		botOwn, botCalls, eng := bot1[0]-bot0[0], bot1[1]-bot0[1], dockertest.EngineCPU()-eng0
		bot := botOwn + botCalls

		load1 := dockertest.LoadAverage()
		l.model.Append(twoStepPlan()...)
		plainCmd := runtest.PlainOpenCode(t, l.model, gitDir, runtest.PromptOf(l.model, t0))
		load2 := settle(t)
		plain := runtest.RunPlain(t, plainCmd)
		load3 := dockertest.LoadAverage()
		total := rep.Total + rep.Shim + bot
		ratio := total.Seconds() / plain.CPU.Seconds()
		mark, ok := loadMark(load0, load1)
		markP, okP := loadMark(load2, load3)
		mark += markP
		if ok && okP {
			ratios = append(ratios, ratio)
		}
		t.Logf("round %d: plan run %.2f s of CPU (sandbox %.2f + its shim %.2f + the bot %.2f + the commands it ran %.2f; the engine %.2f more, shared) in %.1f s, beside one plain opencode run of the same conversation %.2f s (%.1f s wall): x%.2f (goal ≤ 1.3); load average %.1f → %.1f, the plain run's %.1f → %.1f%s\nthe bot started: %v\nsandbox by process:\n%s",
			i, total.Seconds(), rep.Total.Seconds(), rep.Shim.Seconds(), botOwn.Seconds(), botCalls.Seconds(), eng.Seconds(), wall.Seconds(),
			plain.CPU.Seconds(), plain.Wall.Seconds(), ratio, load0, load1, load2, load3, mark, started, rep.Table())
	}
	if len(ratios) == 0 {
		t.Logf("no result: every round ran above a load average of %d", cores())
		return
	}
	t.Logf("result: plan run / plain opencode run x%.2f (median of %d rounds under a load of %d; goal ≤ 1.3)", median(ratios), len(ratios), cores())
}

// twoStepPlan is the model's side of one plan: a shell call, then the plan.
func twoStepPlan() []modeltest.Turn {
	return []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}}, Usage: usage(1000, 20)},
		{Text: planText, Usage: usage(1200, 30)},
	}
}

// productionLike are the bot's settings of a deployment where the e2e
// tests' are for watching: info logs, the default check-run interval.
func productionLike() []string {
	return []string{"SANDBOX_LOG_LEVEL=info", "SANDBOX_PROGRESS_INTERVAL=10s"}
}

// botCPU is the bot process's own CPU time and its docker CLI calls'.
func (l *loop) botCPU() [2]time.Duration {
	own, children, err := dockertest.ProcessCPU(l.bot.cmd.Process.Pid)
	if err != nil {
		l.t.Fatalf("the bot's CPU time: %v", err)
	}
	return [2]time.Duration{own, children}
}

// health is the bot's /healthz answer.
type health struct {
	Queued       int `json:"queued"`
	WorkersBusy  int `json:"workers_busy"`
	RunsFollowed int `json:"runs_followed"`
}

func (l *loop) health() (health, time.Duration, error) {
	start := time.Now()
	resp, err := http.Get("http://" + l.bot.addr + "/healthz")
	if err != nil {
		return health{}, 0, err
	}
	defer resp.Body.Close()
	var h health
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, time.Since(start), err
}

// waitFollowed waits until the bot follows at most n runs and has no
// delivery queued or in hand: a run's bookkeeping after its comment
// (unlock, the session archive, the container's removal) is the bot's
// work for the run too.
func (l *loop) waitFollowed(n int, timeout time.Duration) {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h, _, err := l.health()
		if err == nil && h.RunsFollowed <= n && h.Queued == 0 && h.WorkersBusy == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the bot still follows %d runs after %s (%v)", h.RunsFollowed, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadMark says a figure is not a result when the machine's load average
// before it (l0) was above the core count: other work was running. The
// load after it (l1, printed beside) is mostly the figure's own work (a
// burst of eight runs takes the load past 10 by itself), so it does not
// judge the figure.
func loadMark(l0, _ float64) (string, bool) {
	if l0 > float64(cores()) {
		return fmt.Sprintf(" [load above %d before it: not a result]", cores()), false
	}
	return "", true
}

// settle waits, up to SANDBOX_SETTLE (5m), until the one-minute load
// average is under 1, so that a figure does not start in the tail of the
// one before it (the average decays over minutes: 15 falls under 1 in
// about three), and returns the load it starts at.
func settle(t *testing.T) float64 {
	limit, err := time.ParseDuration(cmp.Or(os.Getenv("SANDBOX_SETTLE"), "5m"))
	if err != nil {
		t.Fatalf("SANDBOX_SETTLE: %v", err)
	}
	for end := time.Now().Add(limit); dockertest.LoadAverage() >= 1 && time.Now().Before(end); {
		time.Sleep(2 * time.Second) // the kernel updates the average every 5 s
	}
	return dockertest.LoadAverage()
}

// cores is the machine's core count, the load under which a figure is
// one.
func cores() int { return runtime.NumCPU() }
