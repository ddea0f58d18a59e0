package handlers

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
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
		"github/no_plan":             NoPlanData{TriggerLabel: "agent"},
		"github/plan_in_progress":    PlanInProgressData{Command: "revise", TaskID: "T-00000001", Round: 2},
		"github/max_rounds":          MaxRoundsData{MaxRounds: 5},
		"github/no_earlier_run":      NoEarlierRunData{Command: "retry"},
		"github/nothing_to_continue": NothingToContinueData{Mode: dispatch.ModePlan},
		"github/wrong_place":         WrongPlaceData{Command: "plan", OnPR: true, Commands: commandsFor(true)},
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
