package runner

import (
	"encoding/json"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// timeline records the run's stages for the receipt's timings.
type timeline struct {
	mu         sync.Mutex
	stages     []dispatch.StageTiming
	firstEvent time.Time
}

// add records a stage that started at start and ends now.
func (t *timeline) add(stage string, start time.Time, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stages = append(t.stages, dispatch.StageTiming{Stage: stage, Start: start.UTC(), Seconds: time.Since(start).Seconds(), Note: note})
}

// span records a stage of known length d that started at start.
func (t *timeline) span(stage string, start time.Time, d time.Duration, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stages = append(t.stages, dispatch.StageTiming{Stage: stage, Start: start.UTC(), Seconds: d.Seconds(), Note: note})
}

// event notes the agent's first event of the run.
func (t *timeline) event(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstEvent.IsZero() {
		t.firstEvent = at.UTC()
	}
}

// ReadStartTimings reads the init's file; a missing or unreadable one is
// no timings (a run outside a sandbox).
func ReadStartTimings(path string) dispatch.StartTimings {
	var st dispatch.StartTimings
	if path == "" {
		return st
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1<<20 {
		return st
	}
	_ = json.Unmarshal(b, &st)
	return st
}

// result is the receipt's timings: the init's steps (read now, so a daemon
// started on first use during the run is in them), then the run's.
func (t *timeline) result(requested time.Time, startFile string) *dispatch.Timings {
	t.mu.Lock()
	defer t.mu.Unlock()
	init := ReadStartTimings(startFile)
	out := &dispatch.Timings{RequestedAt: requested.UTC(), SandboxStarted: init.Started.UTC(), FirstAgentEvent: t.firstEvent}
	if !requested.IsZero() && !init.Started.IsZero() && init.Started.After(requested) {
		// The bot's share and the container's creation: from the request
		// to the init's first instruction.
		out.Stages = append(out.Stages, dispatch.StageTiming{Stage: "dispatch", Start: requested.UTC(),
			Seconds: init.Started.Sub(requested).Seconds(), Note: "bot and container start"})
	}
	out.Stages = append(append(out.Stages, init.Stages...), t.stages...)
	sort.SliceStable(out.Stages, func(i, j int) bool { return out.Stages[i].Start.Before(out.Stages[j].Start) })
	origin := requested
	if origin.IsZero() {
		origin = init.Started
	}
	if !origin.IsZero() && !t.firstEvent.IsZero() {
		out.FirstEventSeconds = t.firstEvent.Sub(origin).Seconds()
	}
	if requested.IsZero() {
		out.RequestedAt = time.Time{}
	}
	if init.Started.IsZero() {
		out.SandboxStarted = time.Time{}
	}
	return out
}

// timed runs f as the stage name.
func (t *timeline) timed(stage string, f func() error) error {
	start := time.Now()
	err := f()
	note := ""
	if err != nil {
		note = "failed"
	}
	t.add(stage, start, note)
	return err
}
