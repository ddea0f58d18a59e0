package lifecycle

import (
	"maps"
	"strings"
	"testing"
)

// cancel is a command a newcomer adds: declared once, with its one row.
var cancel = CommandSpec{Event: "/cancel", Where: InPRs, Flags: []string{"budget"}, Help: "cancel the PR's next run"}

// A command declared once is a row of both tables, not allowed where its
// declaration says (wrong_place, every state of an issue and a PR the App
// did not open), and in docs/lifecycle.md's list of commands.
func TestADeclaredCommandIsEverywhere(t *testing.T) {
	t.Parallel()
	cmds := append(append([]CommandSpec(nil), Commands...), cancel)
	for _, evs := range [][]Event{
		rows([]Event{Label, Mention}, cmds, Typo),
		rows([]Event{Mention}, cmds, Typo),
	} {
		if !containsEvent(evs, cancel.Event) {
			t.Errorf("rows %v lack %s", evs, cancel.Event)
		}
	}
	issue := wrongPlaces(maps.Clone(issueTable), OnIssue, []CommandSpec{cancel})
	for _, s := range IssueStates {
		if got := issue[cancel.Event][s].String(); got != "`wrong_place`" {
			t.Errorf("%s on an issue in %s: %s, want `wrong_place`", cancel.Event, s, got)
		}
	}
	pr := maps.Clone(prTable)
	pr[cancel.Event] = each(do(Cancel, ""), prOurs...)
	pr = wrongPlaces(pr, OnPR, []CommandSpec{cancel})
	if got := pr[cancel.Event][NotOurs].String(); got != "`wrong_place`" {
		t.Errorf("%s on another's PR: %s, want `wrong_place`", cancel.Event, got)
	}
	if got := pr[cancel.Event][PROpen].String(); got != "cancel" {
		t.Errorf("%s on the App's PR: %s, want its row's cancel", cancel.Event, got)
	}
	var b strings.Builder
	writeCommands(&b, cmds)
	if !strings.Contains(b.String(), "| `/cancel` | the App's PR | `--budget` | cancel the PR's next run |") {
		t.Errorf("docs/lifecycle.md's list of commands lacks /cancel:\n%s", b.String())
	}
}

// A rule written for a cell the declaration says is the wrong place is
// the command described twice: the tables refuse it.
func TestACellBothDeclaredAndWrittenIsRefused(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("a rule for /cancel on an issue, where it is not allowed, was taken")
		}
	}()
	wrongPlaces(map[Event]map[State]Rule{cancel.Event: {Idle: help}}, OnIssue, []CommandSpec{cancel})
}

// Every declared command is a row of both tables (whose cells
// TestEveryCellIsDecided checks), and no event looks like a command
// without being declared.
func TestEveryCommandIsRouted(t *testing.T) {
	t.Parallel()
	declared := map[Event]bool{}
	for _, c := range Commands {
		declared[c.Event] = true
		if c.Where == 0 || c.Help == "" || c.Name() == "" || strings.ContainsAny(c.Name(), " /") {
			t.Errorf("%s: declared without a place, a help line or a plain name", c.Event)
		}
		if !containsEvent(IssueEvents, c.Event) || !containsEvent(PREvents, c.Event) {
			t.Errorf("%s is not a row of both tables", c.Event)
		}
	}
	for _, evs := range [][]Event{IssueEvents, PREvents} {
		for _, e := range evs {
			if strings.HasPrefix(string(e), "/") && !declared[e] {
				t.Errorf("%s is a row but no declared command", e)
			}
		}
	}
}

func containsEvent(evs []Event, e Event) bool {
	for _, x := range evs {
		if x == e {
			return true
		}
	}
	return false
}
