package lifecycle

import (
	"maps"
	"slices"
	"strings"
)

// The comment commands' events, each declared in Commands.
const (
	Plan     Event = "/plan"
	Approve  Event = "/approve"
	Revise   Event = "/revise"
	Abort    Event = "/abort"
	Retry    Event = "/retry"
	Continue Event = "/continue"
	Rebase   Event = "/rebase"
	// Preview: a writer asks for the PR's head served by its dev server
	// for a while, in a preview sandbox beside whatever runs on the PR.
	Preview Event = "/preview"
	Status  Event = "/status"
	// AskReview: a writer asks for a review of a pull request, anyone's,
	// having run its validation (the text after it is what to look at).
	AskReview Event = "/review"
	// Fix: a writer asks for a change on a pull request's branch (in a
	// review thread, or with what to change after it).
	Fix Event = "/fix"
	// Run: a writer starts a routine of .sandbox.yml now, on any issue
	// or pull request; it opens a new issue of its own.
	Run Event = "/run"
	// Pick: a writer moves the PR's branch to another attempt of the
	// approval that opened it (/approve --attempts N).
	Pick Event = "/pick"
)

// Where is the set of places a comment command is allowed.
type Where uint8

// The places of a command.
const (
	// InIssues: on an issue.
	InIssues Where = 1 << iota
	// InPRs: on a pull request the App opened.
	InPRs
	// InOthersPRs: on a pull request the App did not open.
	InOthersPRs
)

// CommandSpec is one comment command, declared once: the parser's
// vocabulary and flags, the wrong_place cells of both tables, the help
// reply's list and docs/lifecycle.md's list of commands all derive from Commands.
// What the command does where it is allowed is its rows in the tables
// (table.go), which TestEveryCellIsDecided checks are all there.
type CommandSpec struct {
	// Event is the tables' row: "/" and the command's name.
	Event Event
	Where Where
	// Flags are the --keys the command takes.
	Flags []string
	// NeedsText: the command is nothing without text after it (the
	// feedback of /revise).
	NeedsText bool
	// Help is the line the help reply and docs/lifecycle.md show.
	Help string
}

// Commands are the comment commands, in the order of the tables' rows.
var Commands = []CommandSpec{
	{Event: Plan, Where: InIssues, Flags: []string{"budget", "model", "harness"},
		Help: "write a (new) plan for this issue"},
	{Event: Approve, Where: InIssues, Flags: []string{"budget", "model", "timeout", "harness", "attempts"},
		Help: "start the implementation of the posted plan"},
	{Event: Revise, Where: InIssues | InPRs, Flags: []string{"budget", "model", "timeout"}, NeedsText: true,
		Help: "re-plan (on an issue) or change the PR (on a PR) with your feedback"},
	{Event: Abort, Where: InIssues | InPRs | InOthersPRs,
		Help: "stop the active run; work pushed so far stays on its branch"},
	{Event: Retry, Where: InIssues | InPRs, Flags: []string{"budget", "timeout", "model"},
		Help: "run the last failed step again"},
	{Event: Continue, Where: InIssues | InPRs, Flags: []string{"budget", "timeout"},
		Help: "resume an interrupted run on its branch"},
	{Event: Rebase, Where: InPRs,
		Help: "bring the PR branch up to date with its base"},
	{Event: Preview, Where: InPRs,
		Help: "serve the PR's head with its dev server for a while, at a link on the PR"},
	{Event: AskReview, Where: InPRs | InOthersPRs,
		Help: "review the pull request having run its validation: one review, inline comments on the diff (`/review [what to look at]`)"},
	{Event: Fix, Where: InPRs | InOthersPRs,
		Help: "in a review thread, or with what to change: one commit on the pull request's branch (a fork's gets suggested changes)"},
	{Event: Pick, Where: InPRs, NeedsText: true,
		Help: "move this PR's branch to attempt k of the approval that opened it (`/pick 2`)"},
	{Event: Status, Where: InIssues | InPRs | InOthersPRs,
		Help: "show the run in progress here, or the last one (anyone can ask)"},
	{Event: Run, Where: InIssues | InPRs | InOthersPRs, NeedsText: true,
		Help: "start the routine of .sandbox.yml named after it now: it opens a new issue, whose plan waits for /approve"},
}

// Name is the command's name, as typed after the slash.
func (c CommandSpec) Name() string { return strings.TrimPrefix(string(c.Event), "/") }

// Allowed reports whether the command works at p; ours says a pull
// request is the App's.
func (c CommandSpec) Allowed(p Place, ours bool) bool {
	switch {
	case p == OnIssue:
		return c.Where&InIssues != 0
	case ours:
		return c.Where&InPRs != 0
	}
	return c.Where&InOthersPRs != 0
}

// wrongPlaces adds to t, the table of place p, the wrong_place cells of
// every command where it is not allowed. A cell the table also declares
// is a command described twice: it panics, and so does every test.
func wrongPlaces(t map[Event]map[State]Rule, p Place, cmds []CommandSpec) map[Event]map[State]Rule {
	states := IssueStates
	if p == OnPR {
		states = PRStates
	}
	for _, c := range cmds {
		for _, s := range states {
			if c.Allowed(p, s != NotOurs) {
				continue
			}
			if _, dup := t[c.Event][s]; dup {
				panic("lifecycle: " + string(c.Event) + " in " + string(s) + " is both declared not allowed there and given a rule")
			}
			if t[c.Event] == nil {
				t[c.Event] = map[State]Rule{}
			}
			t[c.Event][s] = reply("wrong_place")
		}
	}
	return t
}

// rows are the rows of a table: the events before the commands, every
// command, and the events after them.
func rows(before []Event, cmds []CommandSpec, after ...Event) []Event {
	out := append([]Event(nil), before...)
	for _, c := range cmds {
		out = append(out, c.Event)
	}
	return append(out, after...)
}

// Replies are the names of the replies the tables choose by name (the
// reply("…") cells, wrong_place included), sorted: each is a
// github/<name> template, rendered with the handlers' one data type for
// table replies.
func Replies() []string {
	seen := map[string]bool{}
	add := func(r Rule) {
		for _, c := range r {
			if name, ok := c.Do.ReplyName(); ok {
				seen[name] = true
			}
		}
	}
	for _, t := range []map[Event]map[State]Rule{issueTable, prTable} {
		for _, row := range t {
			for _, r := range row {
				add(r)
			}
		}
	}
	for _, row := range runTable {
		for _, r := range row {
			add(r)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
