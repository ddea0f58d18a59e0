package handlers

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub/hubtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Every reply template renders with its typed data: a field the template
// names that the struct lacks fails here, not on an issue.
func TestRepliesRenderWithTheirData(t *testing.T) {
	t.Parallel()
	set := templates.MustLoadEmbedded()
	for name, data := range map[string]any{
		"github/ack":                 AckData{TaskID: "T-00000001", Mode: dispatch.ModePlan, Round: 1, Attempt: 1, IssueAuthorExcluded: "mallory", Excluded: []string{"eve"}, Issue: 3},
		"github/refusal":             RefusalData{User: "mallory", Action: "use `/approve`"},
		"github/busy":                BusyData{Holder: "T-00000001", HolderMode: dispatch.ModeExecute, Mode: dispatch.ModePlan, Command: "plan"},
		"github/command_error":       CommandErrorData{Error: "x", Commands: commandsFor(false), State: lifecycle.LabelAwaitingApproval},
		"github/config_error":        ConfigErrorData{Source: "acme/app", Error: "bad", File: ".sandbox.yml"},
		"github/no_plan":             TableReplyData{TriggerLabel: "agent"},
		"github/plan_in_progress":    TableReplyData{Command: "revise", TaskID: "T-00000001", Round: 2},
		"github/max_rounds":          TableReplyData{MaxRounds: 5},
		"github/no_earlier_run":      TableReplyData{Command: "retry"},
		"github/nothing_to_continue": TableReplyData{Mode: dispatch.ModePlan},
		"github/wrong_place":         TableReplyData{Command: "plan", OnPR: true, Commands: commandsFor(true)},
		"github/over_ceiling":        OverCeilingData{Command: "approve", Flag: "budget", Asked: "$500.00", Ceiling: "$10.00", Within: "10", Setting: "limits.max_budget_usd"},
		"github/branch_updated":      BranchUpdatedData{Base: "main"},
	} {
		out, err := set.Render(name, data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.TrimSpace(out) == "" || strings.Contains(out, "<no value>") {
			t.Errorf("%s rendered %q", name, out)
		}
	}
}

// Every github/*.tmpl has samples, and the embedded templates render with
// each: the samples are what operators' overrides are checked with at
// start, so they must be right for the defaults first.
func TestReplySamplesCoverEveryTemplate(t *testing.T) {
	t.Parallel()
	set := templates.MustLoadEmbedded()
	samples := ReplySamples()
	for _, name := range set.Names() {
		if !strings.HasPrefix(name, "github/") {
			continue
		}
		if len(samples[name]) == 0 {
			t.Errorf("%s has no sample data in ReplySamples", name)
		}
		// What an override of it is checked with at start, branches no
		// sample takes included.
		if err := set.Check(name, samples[name]); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for i, data := range samples[name] {
			out, err := set.Render(name, data)
			if err != nil {
				t.Errorf("%s sample %d: %v", name, i, err)
				continue
			}
			if strings.TrimSpace(out) == "" || strings.Contains(out, "<no value>") {
				t.Errorf("%s sample %d rendered %q", name, i, out)
			}
		}
	}
	for name := range samples {
		if !slices.Contains(set.Names(), name) {
			t.Errorf("ReplySamples has %s, which is no template", name)
		}
	}
}

// A reply added to the tables is its template and its cell (reply("…")
// in handlers/lifecycle/table.go) and nothing else: the bot fills it with
// what it saw (TableReplyData) and an operator's override of it is checked
// at start with the table replies' samples, with no type, sample or case
// written for it. Here a newcomer's nothing_to_cancel goes both ways.
func TestANewTableReplyIsItsTemplate(t *testing.T) {
	t.Parallel()
	const name = "nothing_to_cancel"
	set, err := templates.MustLoadEmbedded().With("github/"+name,
		"No run holds this {{if .OnPR}}pull request{{else}}issue{{end}}, so `/{{.Command}}` has nothing to cancel (the last was a {{.Mode}} run). Here:\n{{range .Commands}}- {{.}}\n{{end}}")
	if err != nil {
		t.Fatal(err)
	}
	// Checked at start like every override, with the samples every table
	// reply gets.
	if err := set.Check("github/"+name, tableReplySamples("T-1", commandsFor(false), commandsFor(true))); err != nil {
		t.Fatalf("the new reply fails the table replies' samples: %v", err)
	}
	// Posted with what the bot saw, through the one way a table reply goes.
	hub := hubtest.New()
	repo := hub.Named("octo/hello")
	pr := repo.AddIssue("maya", "Add login", "", &github.PullRequest{})
	sr := &stateReplies{c: &core{Wiring: &Wiring{Templates: set, Settings: Settings{TriggerLabel: "agent", MaxPlanRounds: 5}}, trust: newTrustState()}}
	sc := &scene{place: lifecycle.OnPR, state: lifecycle.PROpen, last: markers.Marker{Mode: dispatch.ModeRevise}}
	ev := event{kind: "/cancel", cmd: &commands.Command{Name: "cancel"}}
	if err := sr.replyState(context.Background(), thread{gh: repo, number: pr, isPR: true}, ev, sc, name); err != nil {
		t.Fatal(err)
	}
	got := repo.Bodies(pr)
	want := "No run holds this pull request, so `/cancel` has nothing to cancel (the last was a revise run). Here:\n- `/abort` — stop the active run"
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("the reply was %q, want one beginning %q", got, want)
	}
}
