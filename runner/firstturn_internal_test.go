package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

func TestFirstTurnReportsTheFirstStepStartOnce(t *testing.T) {
	started := time.Now().Add(-3 * time.Second)
	f := &firstTurn{stage: "agent", started: started}
	if _, _, ok := f.see(harness.Event{Type: harness.EventSession, Time: started.Add(time.Second)}); ok {
		t.Fatal("a session event reported as the first model turn")
	}
	pr, d, ok := f.see(harness.Event{Type: harness.EventStepStart, Time: started.Add(2 * time.Second)})
	if !ok || d != 2*time.Second || pr.Stage != "agent" || !pr.Time.Equal(started.Add(2*time.Second)) {
		t.Fatalf("first step start = %+v, %v, %v", pr, d, ok)
	}
	if pr.Message != "agent's first model turn 2.0s after the agent started" {
		t.Fatalf("message = %q", pr.Message)
	}
	if _, _, ok := f.see(harness.Event{Type: harness.EventStepStart, Time: started.Add(2500 * time.Millisecond)}); ok {
		t.Fatal("a second step start reported again")
	}
}

// A CLI's own stamp that cannot be right (before the exec, in the future)
// gives way to the runner's clock.
func TestFirstTurnDistrustsAStampOutsideTheRun(t *testing.T) {
	for _, at := range []time.Time{time.Now().Add(-time.Hour), time.Now().Add(time.Hour)} {
		f := &firstTurn{stage: "agent", started: time.Now().Add(-time.Second)}
		pr, d, ok := f.see(harness.Event{Type: harness.EventStepStart, Time: at})
		if !ok || d < time.Second || d > time.Minute || !strings.HasPrefix(pr.Message, firstTurnMessage) {
			t.Fatalf("stamp %s: %+v, %v, %v", at, pr, d, ok)
		}
	}
}
