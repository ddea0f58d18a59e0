package sandboxinit

import (
	"sort"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// startTimings is the file of the start's steps the runner puts in its
// receipt (dispatch.EnvStartTimings): in the runtime directory, readable
// by the runner.
type startTimings struct {
	log     zerolog.Logger
	started time.Time
	steps   *steps
	file    string
}

// write writes the start's steps and any later ones (the inner daemon
// started on first use) and names the file in env.
func (t *startTimings) write(env map[string]string) {
	st := dispatch.StartTimings{Started: t.started.UTC(), Stages: t.steps.stages()}
	sort.SliceStable(st.Stages, func(i, j int) bool { return st.Stages[i].Start.Before(st.Stages[j].Start) })
	if err := writeJSONFile(t.file, st); err != nil {
		t.log.Warn().Err(err).Msg("start timings not written")
		return
	}
	if env != nil {
		env[dispatch.EnvStartTimings] = t.file
	}
}

// stages are the recorded steps in the receipt's form, the top-level ones
// the init ran in sequence or in parallel under "sandbox".
func (t *steps) stages() []dispatch.StageTiming {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]dispatch.StageTiming, 0, len(t.done)+1)
	var end time.Duration
	for _, d := range t.done {
		note := dispatch.InitStep
		if d.note != "" {
			note = d.note
		}
		if d.failed {
			note += ", failed"
		}
		out = append(out, dispatch.StageTiming{Stage: d.name, Start: t.origin.Add(d.start).UTC(), Seconds: d.took.Seconds(), Note: note})
		end = max(end, d.start+d.took)
	}
	return append(out, dispatch.StageTiming{Stage: "sandbox", Start: t.origin.UTC(), Seconds: end.Seconds()})
}

// addStep records a step that ran outside the start (the inner daemon on
// first use) and rewrites the timings file.
func (t *startTimings) addStep(name string, start time.Time, took time.Duration, failed bool, note string) {
	if t.steps == nil {
		return
	}
	t.steps.mu.Lock()
	t.steps.done = append(t.steps.done, stepTime{name: name, start: start.Sub(t.steps.origin), took: took, failed: failed, note: note})
	t.steps.mu.Unlock()
	t.write(nil)
}
