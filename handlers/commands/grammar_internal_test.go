package commands

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// A command added to the declarations is parsed, with its flags, routed
// to its row, suggested for a typo, and listed in the help of the place
// it is allowed, and only there.
func TestADeclaredCommandIsParsedAndHelped(t *testing.T) {
	t.Parallel()
	cancel := lifecycle.CommandSpec{Event: "/cancel", Where: lifecycle.InPRs, Flags: []string{"budget"}, Help: "cancel the PR's next run"}
	g := append(Grammar(slices.Clone(lifecycle.Commands)), cancel)
	cmd, err := g.parse("please\n/cancel --budget 2 not now")
	if err != nil || cmd == nil || cmd.Name != "cancel" || cmd.Flags.BudgetUSD != 2 || cmd.Text != "not now" {
		t.Fatalf("parse /cancel: %+v, %v", cmd, err)
	}
	if cmd.Event() != cancel.Event {
		t.Errorf("/cancel routed to %q", cmd.Event())
	}
	if _, err := g.parse("/cancle"); err == nil || !strings.Contains(err.Error(), "Did you mean `/cancel`?") {
		t.Errorf("a typo of /cancel: %v", err)
	}
	if _, err := g.parse("/cancel --model x"); err == nil || !strings.Contains(err.Error(), "Its flags: `--budget`") {
		t.Errorf("/cancel with a flag it does not take: %v", err)
	}
	line := "`/cancel` — cancel the PR's next run"
	if !slices.Contains(g.Help(true), line) || slices.Contains(g.Help(false), line) {
		t.Errorf("help on a PR %q, on an issue %q: want /cancel on the PR only", g.Help(true), g.Help(false))
	}
	if cmd, _ := Grammar(lifecycle.Commands).parse("/cancel"); cmd != nil {
		t.Errorf("an undeclared /cancel parsed as %+v", cmd)
	}
}
