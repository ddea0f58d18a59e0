package main

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The gvisor profile's start beside caps' (issue 31), hand-run with
// TestStartFast:
//
//	SANDBOX_STARTLOAD=1 go test -count=1 -timeout 60m -run 'TestStartFast/second-run-gvisor' -v ./cmd/sandbox-bot/

// secondRunGVisor: the second-run-setup figure behind gVisor beside caps,
// two bots on the docker backend (SANDBOX_ISOLATION=gvisor and caps), each
// with the same repository, the same registry fixture and its own setup
// cache: each bot's first run fills its cache (its start table printed),
// then the later runs alternate between the bots, which goes first
// alternating too, each with the load average.
func secondRunGVisor(t *testing.T) {
	testenv.Runsc(t)
	npm := dockertest.ServeNPM(t, dockertest.NPMPackage{Name: "left-pad", Version: "1.0.0", Body: "module.exports = 1;\n"})
	profiles := []dispatch.Isolation{dispatch.IsolationCaps, dispatch.IsolationGVisor}
	loops := map[dispatch.Isolation]*loop{}
	for _, iso := range profiles {
		loops[iso] = startLoop(t, loopOptions{repoFiles: startRepo(true, npm), hostAllow: registryAllow(npm), env: []string{"SANDBOX_ISOLATION=" + string(iso)}})
	}
	labelRun := func(iso dispatch.Isolation, title string) time.Duration {
		l := loops[iso]
		n := l.gh.AddIssue(e2eRepo, e2eWriter, title, "Use left-pad.")
		l.model.Append(planTurns(1)...)
		t0 := time.Now()
		l.label(n)
		c := l.waitComment(n, "## 📋 Plan", 15*time.Minute)
		got := firstRequestAfter(l.model, t0).Sub(t0)
		t.Logf("%s, %s: label → first model request %s (load average %s)\n%s", iso, title, got.Round(time.Millisecond), testenv.LoadAverage(), startLine(c))
		return got
	}
	for _, iso := range profiles {
		labelRun(iso, "first run (setup not cached)")
	}
	rounds := envInt("SANDBOX_STARTLOAD_ROUNDS", 3)
	runs := map[dispatch.Isolation][]time.Duration{}
	for i := 0; i < rounds; i++ {
		slices.Reverse(profiles)
		for _, iso := range profiles {
			runs[iso] = append(runs[iso], labelRun(iso, fmt.Sprintf("run %d", i+2)))
		}
	}
	// Each round's two runs are next to each other in time: their ratio
	// is less disturbed by load from elsewhere than the means are.
	var ratios []float64
	for i := range rounds {
		ratios = append(ratios, float64(runs[dispatch.IsolationGVisor][i])/float64(runs[dispatch.IsolationCaps][i]))
	}
	sort.Float64s(ratios)
	c, g := mean(runs[dispatch.IsolationCaps]), mean(runs[dispatch.IsolationGVisor])
	t.Logf("later runs: label → first model request gvisor %s (%v), caps %s (%v); gvisor/caps by round %.2f, median x%.2f (goal ≤ 1.5)",
		g.Round(time.Millisecond), roundAll(runs[dispatch.IsolationGVisor]), c.Round(time.Millisecond), roundAll(runs[dispatch.IsolationCaps]),
		ratios, ratios[len(ratios)/2])
	logLoad(t)
}
