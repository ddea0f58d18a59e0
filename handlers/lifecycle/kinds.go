package lifecycle

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// RunKind is a kind of run, declared once: the parts of the bot that
// differ by kind (the state a run holds its issue or pull request in,
// where a restart finds it, whether its check run starts on the PR's
// head, what its interruption does, whether it runs aside with a lock of
// its own) read its declaration instead of asking which mode a run is
// in. A new kind is its declaration here, its row of the run table
// (table.go), the row of the command that starts it and its templates;
// inside the sandbox, its mode (runner/modes.go).
type RunKind struct {
	Mode dispatch.Mode
	// Holds is the state a run of the kind holds an issue in, HoldsPR a
	// pull request.
	Holds, HoldsPR State
	// OnPR: it works on a pull request's branch: its check run is on the
	// PR's head from its start, and after a restart it is the PR's.
	OnPR bool
	// StartsOver: interrupted, it starts again as it was; otherwise it
	// resumes its branch in a continue run.
	StartsOver bool
	// Aside: it runs beside whatever holds the pull request, changing
	// nothing there: a lock of its own, refused rather than queued when
	// the caps are full, no repository token (it gets its code as an
	// archive), and followed by its own comment, not a check run.
	Aside bool
}

// RunKinds are the kinds of run, in the order of the run table's rows.
var RunKinds = []RunKind{
	{Mode: dispatch.ModePlan, Holds: Planning, HoldsPR: Planning, StartsOver: true},
	{Mode: dispatch.ModeExecute, Holds: Executing, HoldsPR: Revising},
	{Mode: dispatch.ModeContinue, Holds: Executing, HoldsPR: Revising, OnPR: true},
	{Mode: dispatch.ModeTask, Holds: Executing, HoldsPR: Revising, StartsOver: true},
	{Mode: dispatch.ModeRevise, Holds: Revising, HoldsPR: Revising, OnPR: true, StartsOver: true},
	{Mode: dispatch.ModeRebase, Holds: Rebasing, HoldsPR: Rebasing, OnPR: true, StartsOver: true},
	{Mode: dispatch.ModePreview, Holds: Executing, HoldsPR: Revising, StartsOver: true, Aside: true},
	// A review holds the pull request's lock (one run on a PR at a time,
	// queued under the caps like any) and changes nothing on it.
	{Mode: dispatch.ModeReview, Holds: Executing, HoldsPR: Revising, StartsOver: true},
	// A fix changes a pull request's branch, anyone's: started over when
	// interrupted, since it pushes nothing before it completed.
	{Mode: dispatch.ModeFix, Holds: Executing, HoldsPR: Revising, StartsOver: true},
	// A fix of a fork's pull request: suggested changes, nothing pushed.
	{Mode: dispatch.ModeSuggest, Holds: Executing, HoldsPR: Revising, StartsOver: true},
}

// KindOf is the declared kind of mode; a mode no kind declares (a receipt
// from a newer runner) is an execute run's kind, which changes code on a
// branch of its own, under its own name.
func KindOf(mode dispatch.Mode) RunKind {
	if k, ok := declaredKind(mode); ok {
		return k
	}
	k, _ := declaredKind(dispatch.ModeExecute)
	k.Mode = mode
	return k
}

func declaredKind(mode dispatch.Mode) (RunKind, bool) {
	for _, k := range RunKinds {
		if k.Mode == mode {
			return k, true
		}
	}
	return RunKind{}, false
}

// RunState is the state a run of mode puts the issue or PR in while it
// holds it.
func RunState(p Place, mode dispatch.Mode) State {
	if p == OnPR {
		return KindOf(mode).HoldsPR
	}
	return KindOf(mode).Holds
}

// runModes are the run table's rows.
func runModes() []dispatch.Mode {
	out := make([]dispatch.Mode, len(RunKinds))
	for i, k := range RunKinds {
		out[i] = k.Mode
	}
	return out
}

// StartedBy is the mode of the fresh run event e starts at place p, where
// its row starts one (StartRun) in some state: what a busy reply says was
// asked for.
func StartedBy(p Place, e Event) (dispatch.Mode, bool) {
	if p == OnPR {
		return startedBy(prTable, e)
	}
	return startedBy(issueTable, e)
}

func startedBy(t map[Event]map[State]Rule, e Event) (dispatch.Mode, bool) {
	for _, r := range t[e] {
		for _, c := range r {
			if mode, ok := c.Do.StartsMode(); ok {
				return mode, true
			}
		}
	}
	return "", false
}
