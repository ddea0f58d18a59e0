package lifecycle

import (
	"maps"
	"slices"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Every kind of run is a row of the run table and every row a kind, each
// mode declared once; a mode no kind declares is taken as an execute run
// under its own name.
func TestEveryRunKindIsARowOfTheRunTable(t *testing.T) {
	t.Parallel()
	var modes []dispatch.Mode
	for _, k := range RunKinds {
		if slices.Contains(modes, k.Mode) {
			t.Errorf("%s declared twice", k.Mode)
		}
		modes = append(modes, k.Mode)
		if _, ok := runTable[k.Mode]; !ok {
			t.Errorf("%s has no row in the run table", k.Mode)
		}
		if k.Holds == "" || k.HoldsPR == "" {
			t.Errorf("%s holds no state", k.Mode)
		}
	}
	for m := range runTable {
		if !slices.Contains(modes, m) {
			t.Errorf("the run table has a row for %s, which no kind declares", m)
		}
	}
	if k := KindOf("deploy"); k.Mode != "deploy" || k.OnPR || k.StartsOver || k.Aside || k.Holds != Executing || k.HoldsPR != Revising {
		t.Errorf("KindOf(deploy) = %+v, want an execute run's kind", k)
	}
}

// The state each kind of run holds its issue or pull request in.
func TestRunState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode      dispatch.Mode
		issue, pr State
	}{
		{dispatch.ModePlan, Planning, Planning},
		{dispatch.ModeExecute, Executing, Revising},
		{dispatch.ModeContinue, Executing, Revising},
		{dispatch.ModeTask, Executing, Revising},
		{dispatch.ModeRevise, Revising, Revising},
		{dispatch.ModeRebase, Rebasing, Rebasing},
	} {
		if got := RunState(OnIssue, tc.mode); got != tc.issue {
			t.Errorf("RunState(issue, %s) = %s, want %s", tc.mode, got, tc.issue)
		}
		if got := RunState(OnPR, tc.mode); got != tc.pr {
			t.Errorf("RunState(PR, %s) = %s, want %s", tc.mode, got, tc.pr)
		}
	}
}

// A new kind's run starts from its row with StartRun, which needs no
// action of its own: it starts a run, says its mode, and is what a busy
// reply says the command asked for.
func TestANewKindStartsFromItsRow(t *testing.T) {
	t.Parallel()
	const docs dispatch.Mode = "docs"
	a := StartRun(docs)
	if mode, ok := a.StartsMode(); !ok || mode != docs || !a.Starts() {
		t.Errorf("StartRun(docs): mode %q, %v, starts %v", mode, ok, a.Starts())
	}
	for _, other := range []Action{StartPlan, Execute, Reply("start a x run"), Action("start a  run")} {
		if mode, ok := other.StartsMode(); ok {
			t.Errorf("%s starts mode %q", other, mode)
		}
	}
	pr := maps.Clone(prTable)
	pr["/docs"] = each(do(a, Revising), prOurs...)
	if mode, ok := startedBy(pr, "/docs"); !ok || mode != docs {
		t.Errorf("startedBy(/docs) = %q, %v", mode, ok)
	}
	if c := pr["/docs"][PROpen].Decide(Facts{}); c.Do != a || c.Next != Revising {
		t.Errorf("the row decides %+v", c)
	}
	if _, ok := StartedBy(OnPR, Rebase); ok {
		t.Error("/rebase's row starts a run of its own action, not StartRun")
	}
}
