package main

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// attemptsLoadAgent is the command harness's agent of the attempts load
// test: a plan at once, then an execute run that waits on its "model" for
// ten seconds (an agent's time is mostly the model's) and writes one file.
const attemptsLoadAgent = `command: |
  cat > /dev/null
  if [ -n "$SANDBOX_READ_ONLY" ]; then echo "1. Write greet.txt saying hello."; exit 0; fi
  sleep 10
  echo "hello from attempt ${SANDBOX_ATTEMPT:-1}" > greet.txt
  echo "Wrote greet.txt."
validate:
  greeting: grep -q hello greet.txt
repair:
  attempts: 0
`

// TestAttemptsLoad is issue 44's figure: /approve --attempts 3 → the PR,
// beside a plain /approve (one attempt alone) → the PR, through the bot
// on Docker with the real image, alternating, the load printed. Each
// execute run waits ten seconds on its agent, so what the ratio shows is
// what three sandboxes at once cost on this machine (their starts, their
// inner daemons, their validation) and the ranking after them. Hand-run:
// SANDBOX_ATTEMPTSLOAD=1 (rounds: SANDBOX_ATTEMPTSLOAD_ROUNDS, default 2).
func TestAttemptsLoad(t *testing.T) {
	if os.Getenv("SANDBOX_ATTEMPTSLOAD") == "" {
		t.Skip("hand-run load test: set SANDBOX_ATTEMPTSLOAD=1")
	}
	l := startLoop(t, loopOptions{harness: "command", model: "none", env: []string{"SANDBOX_MAX_RUNS=4"}, sandboxYML: attemptsLoadAgent})
	approveToPR := func(name, command string) time.Duration {
		n := l.gh.AddIssue(e2eRepo, e2eWriter, name, "Create greet.txt saying hello.")
		l.label(n)
		l.waitComment(n, "## 📋 Plan", 5*time.Minute)
		t0 := time.Now()
		l.command(n, command)
		l.waitComment(n, "🚀 Opened", 10*time.Minute)
		return time.Since(t0)
	}
	approveToPR("Warm up", "/approve") // the first run pays for the image's caches
	var one, three []time.Duration
	for i := 0; i < envInt("SANDBOX_ATTEMPTSLOAD_ROUNDS", 2); i++ {
		logLoad(t)
		one = append(one, approveToPR(fmt.Sprintf("One attempt %d", i+1), "/approve"))
		logLoad(t)
		three = append(three, approveToPR(fmt.Sprintf("Three attempts %d", i+1), "/approve --attempts 3"))
		t.Logf("round %d: /approve → PR %s; /approve --attempts 3 → PR %s", i+1, one[i].Round(time.Millisecond), three[i].Round(time.Millisecond))
	}
	logLoad(t)
	t.Logf("/approve --attempts 3 → PR %s (mean of %v) beside /approve → PR %s (mean of %v): x%.2f",
		mean(three).Round(time.Millisecond), roundAll(three), mean(one).Round(time.Millisecond), roundAll(one), float64(mean(three))/float64(mean(one)))
}
