package handlers_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
)

// Hand-run measurements of the routines (SANDBOX_ROUTINES_LOAD=1, out of
// -short), each printed with the load average:
//
//	SANDBOX_ROUTINES_LOAD=1 go test -run 'TestRoutineTickToIssueLatency|TestRoutineSchedulerIdleCost' -v ./handlers/

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func skipUnlessLoad(t *testing.T) {
	if testing.Short() || os.Getenv("SANDBOX_ROUTINES_LOAD") == "" {
		t.Skip("hand-run measurement: set SANDBOX_ROUTINES_LOAD=1")
	}
}

// Tick → issue created, over 20 ticks of a routine every minute, two
// replicas on one clock, the real HTTP handler and go-github against the
// fake GitHub: from the clock's move to the issue on the fake, p50 and
// max, beside the floor of the clock's own poll (20 ms, the time a replica
// takes to see the move at most) and the issue's own creation through the
// fake measured in the same run.
func TestRoutineTickToIssueLatency(t *testing.T) {
	skipUnlessLoad(t)
	h, _, clock := routineHarness(t, time.Date(2026, 11, 29, 9, 0, 30, 0, time.UTC))
	var lat []time.Duration
	for i := 1; i <= 20; i++ {
		if i > 1 {
			h.gh.CloseIssue(testRepo, routineIssues(h, "sweep")[i-2].Number)
		}
		start := time.Now()
		clock.advance(time.Minute)
		h.gh.WaitFor(10*time.Second, fmt.Sprintf("issue %d", i), func() bool { return len(routineIssues(h, "sweep")) >= i })
		lat = append(lat, time.Since(start))
		waitTick(h, "sweep", clock.now.Truncate(time.Minute).Format("2006-01-02T15:04"), "opened #")
	}
	if n := len(routineIssues(h, "sweep")); n != 20 {
		t.Fatalf("%d issues after 20 ticks; want 20", n)
	}
	slices.Sort(lat)
	// The floor, in the same run: the issue's own POST to the fake (the
	// one call of the tick that cannot be left out), p50 of 20.
	var floors []time.Duration
	for range 20 {
		req, _ := http.NewRequest("POST", h.gh.URL()+"repos/"+testRepo+"/issues", strings.NewReader(`{"title":"floor","labels":["floor"]}`))
		req.Header.Set("Authorization", "token floor")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		floors = append(floors, time.Since(start))
	}
	slices.Sort(floors)
	t.Logf("tick → issue created over 20 ticks: p50 %s, max %s; floor: the clock file's poll (20ms) + one POST /issues to the fake (p50 %s); load average %s",
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), floors[len(floors)/2].Round(10*time.Microsecond), loadAverage())
}

// The scheduler's idle cost: 1,000 routines (daily, at spread times)
// declared across 100 repositories, the bot started and idle, against the
// same bot with no routines, alternately; the process's CPU per hour
// extrapolated from each 20 s window.
func TestRoutineSchedulerIdleCost(t *testing.T) {
	skipUnlessLoad(t)
	measure := func(routines bool) time.Duration {
		gh := githubtest.New(t, githubtest.Options{})
		for r := range 100 {
			yml := defaultSandboxYML
			if routines {
				yml += "routines:\n"
				for i := range 10 {
					yml += fmt.Sprintf("  - name: r%d\n    schedule: \"%d %d * * *\"\n    timezone: Europe/Berlin\n    task: chore %d\n", i, (r+i*7)%60, (r+i)%24, i)
				}
			}
			gh.AddRepo(fmt.Sprintf("octo-org/repo%03d", r), testInstallation, map[string]string{".sandbox.yml": yml})
		}
		h := newHarnessOn(t, gh, nil, nil)
		want := 0
		if routines {
			want = 1000
		}
		h.gh.WaitFor(60*time.Second, "every routine read", func() bool { return len(h.srv.Routines(t.Context(), "")) == want })
		time.Sleep(2 * time.Second) // settle: the start's reads are done
		before := cpuTime(t)
		time.Sleep(20 * time.Second)
		used := cpuTime(t) - before
		h.stop()
		return used * 180 // per hour
	}
	var with, without []time.Duration
	for range 2 {
		without = append(without, measure(false))
		with = append(with, measure(true))
	}
	t.Logf("idle CPU per hour: with 1,000 routines %v; floor (the same bot, no routines) %v; load average %s", with, without, loadAverage())
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
