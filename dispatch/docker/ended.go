package docker

import (
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// endedKeep is how long the backend remembers that a run ended.
const endedKeep = 10 * time.Minute

// endedRuns remembers the runs the engine reported ended: an ended
// container does not run again (the backend never restarts one), so the
// reads that follow the end of a run (its result, its session, its
// artifacts) need not ask the engine again, each a docker CLI call (about
// 60-100 ms of CPU on a 2-core machine). Entries go at Cleanup, and after
// endedKeep where another replica cleaned the run up.
type endedRuns struct {
	mu   sync.Mutex
	runs map[string]endedRun
}

type endedRun struct {
	st dispatch.RunStatus
	at time.Time
}

func (e *endedRuns) get(taskID string) (dispatch.RunStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.runs[taskID]
	if !ok || time.Since(r.at) > endedKeep {
		delete(e.runs, taskID)
		return dispatch.RunStatus{}, false
	}
	return r.st, true
}

func (e *endedRuns) put(taskID string, st dispatch.RunStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = map[string]endedRun{}
	}
	now := time.Now()
	for id, r := range e.runs {
		if now.Sub(r.at) > endedKeep {
			delete(e.runs, id)
		}
	}
	e.runs[taskID] = endedRun{st: st, at: now}
}

func (e *endedRuns) forget(taskID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.runs, taskID)
}
