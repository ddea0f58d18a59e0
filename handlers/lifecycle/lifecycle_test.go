package lifecycle

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/testkit/docsync"
)

var update = flag.Bool("update", false, "rewrite the table in docs/lifecycle.md")

// Every event has a cell in every state of its place, and every run mode
// a cell for every end: the bot answers nothing by accident. Every case
// names a known action, and a case that changes the state names one of
// the place's states.
func TestEveryCellIsDecided(t *testing.T) {
	t.Parallel()
	check := func(where string, states []State, events []Event, table map[Event]map[State]Rule) {
		if len(table) != len(events) {
			t.Errorf("%s: the table has %d rows, the place %d events", where, len(table), len(events))
		}
		for _, e := range events {
			if len(table[e]) != len(states) {
				t.Errorf("%s, %s: %d cells for %d states", where, e, len(table[e]), len(states))
			}
			for _, s := range states {
				r, ok := table[e][s]
				if !ok || len(r) == 0 {
					t.Errorf("%s: no cell for %s in %s", where, e, s)
				}
				for i, c := range r {
					if i < len(r)-1 && c.If == Always {
						t.Errorf("%s, %s in %s: case %d always holds, so the cases after it never do", where, e, s, i)
					}
					if c.Next != "" && !contains(states, c.Next) && !(where == "issue" && c.Next == PROpen) {
						t.Errorf("%s, %s in %s: next state %q is not one of the place's", where, e, s, c.Next)
					}
				}
				if r[len(r)-1].If != Always {
					t.Errorf("%s, %s in %s: no case holds when no guard does", where, e, s)
				}
			}
		}
	}
	check("issue", IssueStates, IssueEvents, issueTable)
	check("pull request", PRStates, PREvents, prTable)
	for _, m := range dispatch.Modes {
		for _, e := range Ends {
			if r := runTable[m][e]; len(r) == 0 || r[len(r)-1].If != Always {
				t.Errorf("run table: no rule for a %s run that ended %s", m, e)
			}
		}
	}
}

func contains(states []State, s State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// Guards read what they say.
func TestGuards(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		g    Guard
		f    Facts
		want bool
	}{
		{NoPlan, Facts{}, true},
		{NoPlan, Facts{HasPlan: true}, false},
		{PastLastRound, Facts{PlanRound: 5, MaxRounds: 5}, true},
		{PastLastRound, Facts{PlanRound: 4, MaxRounds: 5}, false},
		{NoEarlierRun, Facts{HasLastRun: true}, false},
		{NoBranch, Facts{LastMode: dispatch.ModeExecute, LastBranch: "agent/x"}, false},
		{NoBranch, Facts{LastMode: dispatch.ModePlan, LastBranch: "agent/x"}, true},
		{NoBranch, Facts{LastMode: dispatch.ModeExecute}, true},
		{RetryNoBranch, Facts{LastMode: dispatch.ModeContinue}, true},
		{RetryNoBranch, Facts{LastMode: dispatch.ModeExecute}, false},
		{AttemptsLeft, Facts{AttemptsLeft: true}, true},
		{NoCommits, Facts{}, false},
		{CIFixOff, Facts{CIFixOff: true}, true},
		{PersonPushed, Facts{PersonPushed: true}, true},
		{BaseFails, Facts{}, false},
		{FixesUsedUp, Facts{FixesUsedUp: true}, true},
	} {
		if got := c.g.Holds(c.f); got != c.want {
			t.Errorf("%q on %+v = %v, want %v", c.g, c.f, got, c.want)
		}
	}
}

// The rows that are not webhook events: a queued run starts when its slot
// frees, and a restart follows what runs and admits what waits.
func TestQueueAndRestartRows(t *testing.T) {
	t.Parallel()
	for _, p := range []Place{OnIssue, OnPR} {
		states := IssueStates
		if p == OnPR {
			states = PRStates
		}
		for _, s := range states {
			c, ok := Decide(p, s, SlotFree, Facts{})
			if want := map[bool]Action{true: StartQueued, false: Nothing}[s == Queued]; !ok || c.Do != want {
				t.Errorf("%s, slot free in %s: %s, want %s", p, s, c.Do, want)
			}
			c, _ = Decide(p, s, Restart, Facts{})
			want := Nothing
			switch {
			case s == Queued:
				want = Admit
			case s.Running():
				want = Follow
			}
			if c.Do != want {
				t.Errorf("%s, restart in %s: %s, want %s", p, s, c.Do, want)
			}
		}
	}
}

// The state labels: each running state shows one, the ends show theirs,
// and neither idle nor aborted shows any.
func TestLabels(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{
		Idle: "", Queued: LabelQueued, Planning: LabelPlanning, PlanPosted: LabelAwaitingApproval, Executing: LabelRunning,
		Revising: LabelRunning, Rebasing: LabelRunning, Done: LabelDone, PROpen: LabelDone, Failed: LabelFailed, Aborted: "", NotOurs: "",
	} {
		if got := s.Label(); got != want {
			t.Errorf("%s shows %q, want %q", s, got, want)
		}
	}
}

// docs/lifecycle.md shows the table as the code has it.
func TestDocsShowTheTable(t *testing.T) {
	docsync.Check(t, filepath.Join("..", "..", "docs", "lifecycle.md"),
		"go test ./handlers/lifecycle -run TestDocsShowTheTable -update", Markdown(), *update)
}

// Failing checks on the App's PR: the guards in the order the issue asks,
// and a held PR only waits.
func TestChecksFailedRow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    State
		f    Facts
		want Action
	}{
		{PROpen, Facts{}, FixCI},
		{PROpen, Facts{CIFixOff: true, PersonPushed: true}, Nothing},
		{PROpen, Facts{PersonPushed: true, BaseFails: true}, Nothing},
		{PROpen, Facts{BaseFails: true, FixesUsedUp: true}, ReportBaseFails},
		{Failed, Facts{FixesUsedUp: true}, GiveUpCI},
		{Revising, Facts{}, WaitForRun},
		{Queued, Facts{CIFixOff: true}, Nothing},
		{Aborted, Facts{}, Nothing},
		{NotOurs, Facts{}, Nothing},
	} {
		got, ok := Decide(OnPR, c.s, ChecksFailed, c.f)
		if !ok || got.Do != c.want {
			t.Errorf("checks failed in %s with %+v: %s, want %s", c.s, c.f, got.Do, c.want)
		}
	}
}
