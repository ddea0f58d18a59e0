package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// burst labels n issues at once through the bot and waits for the last
// plan comment, then runs the floor: n plain `opencode run`s of the same
// plan at once on the host. It alternates the two for the rounds, lets
// the load settle before each figure (settle), prints each figure with the
// load average before and after it, marks a figure that started above a
// load of the core count as no result, and gives the median of the rounds
// that are results.
func burst(t *testing.T, n int) {
	rounds := envInt("SANDBOX_STARTLOAD_ROUNDS", 3)
	l := startLoop(t, loopOptions{repoFiles: startRepo(false, nil), env: productionLike()})
	gitDir := l.gh.Repo(e2eRepo).GitDir
	var ratios []float64
	var bursts, floors []time.Duration
	for r := 1; r <= rounds; r++ {
		load0 := settle(t)
		t0, m0, eng0, bot0 := time.Now(), dockertest.ReadMachineCPU(), dockertest.EngineCPU(), l.botCPU()
		last, plans, hz := l.burstOnce(t, n, r)
		load1 := dockertest.LoadAverage()
		mB, engB, bot1 := dockertest.ReadMachineCPU().Since(m0), dockertest.EngineCPU()-eng0, l.botCPU()
		l.waitFollowed(0, 10*time.Minute) // the bot's bookkeeping is not the floor's
		cmds := make([]*exec.Cmd, n)
		prompt := runtest.PromptOf(l.model, t0)
		for i := range cmds {
			cmds[i] = runtest.PlainOpenCode(t, l.model, gitDir, prompt)
		}
		l.model.Append(planTurns(n)...)
		load2 := settle(t)
		m2 := dockertest.ReadMachineCPU()
		fl := runtest.RunPlain(t, cmds...)
		load3 := dockertest.LoadAverage()
		mF := dockertest.ReadMachineCPU().Since(m2)
		markB, okB := loadMark(load0, load1)
		markF, okF := loadMark(load2, load3)
		ratio := last.Seconds() / fl.Wall.Seconds()
		if okB && okF {
			ratios = append(ratios, ratio)
			bursts, floors = append(bursts, last), append(floors, fl.Wall)
		}
		var each strings.Builder
		for _, p := range plans {
			fmt.Fprintf(&each, "  %s\n", p)
		}
		t.Logf("round %d: burst of %d labels → last plan %s, load average %.1f → %.1f%s; floor: %d plain opencode runs at once on the host %s (%.1f s of CPU), load average %.1f → %.1f%s: x%.2f (goal ≤ 1.5)\nwhere each plan's time went, from the label (in the order posted; the + is the bot's writes to GitHub after the run ended): %s\n%sthe bot's /healthz during the burst: %s\nduring the burst: %s, of which the engine (dockerd, containerd) %.1f s and the bot %.1f s with its commands %.1f s; during the floor: %s",
			r, n, last.Round(100*time.Millisecond), load0, load1, markB, n, fl.Wall.Round(100*time.Millisecond), fl.CPU.Seconds(), load2, load3, markF, ratio,
			writesShare(plans), each.String(), hz, mB, engB.Seconds(), (bot1[0] - bot0[0]).Seconds(), (bot1[1] - bot0[1]).Seconds(), mF)
	}
	if len(ratios) == 0 {
		t.Logf("burst of %d: no result: every round ran above a load average of %d", n, cores())
		return
	}
	t.Logf("burst of %d: label → last plan %v beside the floor %v (%d plain `opencode run`s at once on the host, alternated with the bursts): result x%.2f (median of %d rounds under a load of %d; goal ≤ 1.5)",
		n, roundAll(bursts), roundAll(floors), n, median(ratios), len(ratios), cores())
}

// planTimes is where one plan of a burst spent its time, from the label:
// until the bot saw its run end (the sandbox, the agent and reading the
// result), then until its plan comment was posted (the bot's writes to
// GitHub, paced per installation).
type planTimes struct {
	issue        int
	ended, plan  time.Duration
	endedUnknown bool
}

func (p planTimes) String() string {
	if p.endedUnknown {
		return fmt.Sprintf("#%d: plan %s (run end not in the log)", p.issue, p.plan.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("#%d: run ended %s, plan posted %s (+%s)", p.issue, p.ended.Round(100*time.Millisecond),
		p.plan.Round(100*time.Millisecond), (p.plan - p.ended).Round(100*time.Millisecond))
}

// burstOnce labels n new issues at once and returns the time to the last
// plan comment, every plan's times in the order they were posted, and the
// bot's /healthz latency meanwhile.
func (l *loop) burstOnce(t *testing.T, n, round int) (time.Duration, []planTimes, string) {
	var issues []int
	for i := 0; i < n; i++ {
		issues = append(issues, l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Task %d.%d", round, i+1), "Pad the output."))
	}
	l.model.Append(planTurns(n)...)
	stop := l.pollHealth()
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, is := range issues {
		wg.Add(1)
		go func(is int) { defer wg.Done(); l.label(is) }(is)
	}
	wg.Wait()
	for _, is := range issues {
		l.waitComment(is, "## 📋 Plan", 30*time.Minute)
	}
	hz := stop()
	ended := runsEnded(l.bot.logs.String(), t0)
	var plans []planTimes
	for _, is := range issues {
		for _, c := range l.gh.Issue(e2eRepo, is).Comments {
			if strings.Contains(c.Body, "## 📋 Plan") {
				e, ok := ended[is]
				plans = append(plans, planTimes{issue: is, plan: c.CreatedAt.Sub(t0), ended: e.Sub(t0), endedUnknown: !ok})
			}
		}
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].plan < plans[j].plan })
	return plans[len(plans)-1].plan, plans, hz
}

// runsEnded reads from the bot's log when it saw each issue's run end
// ("run ended", logged once the result is read, before anything of it is
// written to GitHub), for runs that ended after t0.
func runsEnded(logs string, t0 time.Time) map[int]time.Time {
	out := map[int]time.Time{}
	for _, line := range strings.Split(logs, "\n") {
		var e struct {
			Time    time.Time `json:"time"`
			Message string    `json:"message"`
			Issue   int       `json:"issue"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Message != "run ended" || e.Time.Before(t0) {
			continue
		}
		if _, seen := out[e.Issue]; !seen {
			out[e.Issue] = e.Time
		}
	}
	return out
}

// writesShare sums up the plans' times: the mean and the longest of run
// end → plan posted, and the last run's end.
func writesShare(plans []planTimes) string {
	var sum, longest, lastEnd time.Duration
	known := 0
	for _, p := range plans {
		if p.endedUnknown {
			continue
		}
		known++
		sum += p.plan - p.ended
		longest = max(longest, p.plan-p.ended)
		lastEnd = max(lastEnd, p.ended)
	}
	if known == 0 {
		return "no run end in the bot's log"
	}
	return fmt.Sprintf("the last run ended at %s; run end → plan posted: mean %s, longest %s (%d plans)",
		lastEnd.Round(100*time.Millisecond), (sum / time.Duration(known)).Round(100*time.Millisecond), longest.Round(100*time.Millisecond), known)
}

// pollHealth asks the bot's /healthz every 50 ms until the returned
// function is called, which sums up the latencies (p50, p99, max).
func (l *loop) pollHealth() func() string {
	done := make(chan struct{})
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	wg.Add(1)
	// Every second, a line of the timeline: where a burst leaves the
	// cores idle, and what the bot and the sandboxes were doing then.
	var timeline strings.Builder
	t0, m0, reqs0 := time.Now(), dockertest.ReadMachineCPU(), len(l.model.Requests())
	next := t0.Add(time.Second)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			h, d, err := l.health()
			if err == nil {
				lat = append(lat, d)
			} else {
				failed++
			}
			if now := time.Now(); now.After(next) {
				m := dockertest.ReadMachineCPU()
				fmt.Fprintf(&timeline, "%4.0fs busy %3.0f%% containers %d queued %d workers %d followed %d model requests %d\n",
					now.Sub(t0).Seconds(), 100*m.Since(m0).Busy.Seconds()/max(1e-9, m.Since(m0).Busy.Seconds()+m.Since(m0).Idle.Seconds()),
					dockertest.RunningContainers(), h.Queued, h.WorkersBusy, h.RunsFollowed, len(l.model.Requests())-reqs0)
				m0, next = m, next.Add(time.Second)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() string {
		close(done)
		wg.Wait()
		if len(lat) == 0 {
			return fmt.Sprintf("no answer (%d failed)", failed)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		return fmt.Sprintf("p50 %s, p99 %s, max %s (%d requests, %d failed)\ntimeline:\n%s", q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), len(lat), failed, timeline.String())
	}
}
