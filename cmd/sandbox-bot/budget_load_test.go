package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBudgetAdmissionLoad is issue 41's figure: what the budgets' admission
// (a reservation checked and set in the backend's book before the token is
// minted) adds to label → the first model request, on a repository's later
// runs, beside the same run without budgets: the same bot on Docker, the
// real image, OpenCode on the scripted model, restarted before every run
// with budgets or without, alternating, the load printed. Hand-run:
// SANDBOX_BUDGETLOAD=1 (rounds: SANDBOX_BUDGETLOAD_ROUNDS, default 3).
func TestBudgetAdmissionLoad(t *testing.T) {
	if os.Getenv("SANDBOX_BUDGETLOAD") == "" {
		t.Skip("hand-run load test: set SANDBOX_BUDGETLOAD=1")
	}
	l := startLoop(t, loopOptions{repoFiles: startRepo(false, nil)})
	restart := func(env ...string) {
		_ = l.bot.cmd.Process.Signal(syscall.SIGTERM)
		<-l.bot.done
		l.bot = l.startBotAt(l.addr, env...)
	}
	labelRun := func(i int) time.Duration { return labelToFirstRequest(l, i) }
	budgets := []string{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD=1000", "SANDBOX_BUDGET_REPO_MONTHLY_USD=500"}
	labelRun(0) // the repository's first run
	var without, with []time.Duration
	for i := 1; i <= envInt("SANDBOX_BUDGETLOAD_ROUNDS", 3); i++ {
		restart()
		logLoad(t)
		without = append(without, labelRun(2*i-1))
		restart(budgets...)
		logLoad(t)
		with = append(with, labelRun(2*i))
		t.Logf("round %d: label → first model request without budgets %s, with budgets %s", i, without[i-1].Round(time.Millisecond), with[i-1].Round(time.Millisecond))
	}
	logLoad(t)
	t.Logf("label → first model request with budgets %s (mean of %v) beside without %s (mean of %v): x%.2f, %s added",
		mean(with).Round(time.Millisecond), roundAll(with), mean(without).Round(time.Millisecond), roundAll(without),
		float64(mean(with))/float64(mean(without)), (mean(with) - mean(without)).Round(time.Millisecond))
}
