package sandboxinit

import (
	"sort"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// startTimingsFile is where the init leaves its steps for the runner's
// receipt (dispatch.EnvStartTimings); in the runtime directory, readable
// by the runner.
func (s *sandbox) startTimingsFile() string { return s.opts.runtimeDir + "/start-timings.json" }

// writeStartTimings writes the start's steps and any later ones (the inner
// daemon started on first use) and names the file in env.
func (s *sandbox) writeStartTimings(env map[string]string) {
	st := dispatch.StartTimings{Started: s.started.UTC(), Stages: s.steps.stages()}
	sort.SliceStable(st.Stages, func(i, j int) bool { return st.Stages[i].Start.Before(st.Stages[j].Start) })
	if err := writeJSONFile(s.startTimingsFile(), st); err != nil {
		s.log.Warn().Err(err).Msg("start timings not written")
		return
	}
	if env != nil {
		env[dispatch.EnvStartTimings] = s.startTimingsFile()
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
func (s *sandbox) addStep(name string, start time.Time, took time.Duration, failed bool, note string) {
	if s.steps == nil {
		return
	}
	s.steps.mu.Lock()
	s.steps.done = append(s.steps.done, stepTime{name: name, start: start.Sub(s.steps.origin), took: took, failed: failed, note: note})
	s.steps.mu.Unlock()
	s.writeStartTimings(nil)
}
