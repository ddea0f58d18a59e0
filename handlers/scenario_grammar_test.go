package handlers_test

import (
	"strings"
	"testing"
)

// A writer's /approve that the rendered comment shows as code, hides,
// quotes or folds away approves nothing and gets no reply.
func TestApproveInsideBlocksDoesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n, _ := h.planned("Blocks")
	before := len(h.botComments(n))
	for _, body := range []string{
		"To approve, type:\n\n    /approve",
		"LGTM <!--\n/approve\n-->",
		"<details><summary>How</summary>\n\n/approve\n\n</details>",
		"> /approve\nsaid the bot's docs",
		"```\n/approve\n```",
	} {
		h.comment(n, writer, body)
	}
	h.idle()
	h.wantRuns(1, "/approve in code, comments, quotes and details")
	if got := h.botComments(n)[before:]; len(got) != 0 {
		t.Errorf("the bot replied to non-commands: %q", got)
	}
}

// /approve while the plan is being written says so (and not "label the
// issue to get a plan"); nothing starts.
func TestApproveWhilePlanningSaysThePlanIsComing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Plan in progress", "")
	h.label(n, writer, "d-planning")
	plan := h.waitSubmitted(1)[0]
	h.waitComment(n, "ack", func(c string) bool { return strings.Contains(c, "Planning this issue") })
	h.comment(n, writer, "/approve")
	c := h.waitComment(n, "plan-in-progress reply", func(c string) bool { return strings.Contains(c, "still being written") })
	if !strings.Contains(c, plan.Order.TaskID) || strings.Contains(c, "Label the issue") {
		t.Errorf("reply must name the plan run and not advise labelling:\n%s", c)
	}
	golden(t, "plan_in_progress.md", c)
	h.idle()
	h.wantRuns(1, "/approve while planning")
}

// A non-writer repeating commands gets one refusal per issue per hour, and
// their permission is looked up once.
func TestRepeatedOutsiderCommandsGetOneRefusal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Spam target", "")
	for _, body := range []string{"/plan", "/approve", "/abort"} {
		h.comment(n, reader, body)
		h.idle()
	}
	if refusals := h.countBotComments(n, "Only people with write access"); refusals != 1 {
		t.Errorf("three commands by a non-writer got %d refusals, want 1", refusals)
	}
	if got := h.gh.CountRequests("GET /repos/" + testRepo + "/collaborators/" + reader + "/permission"); got != 1 {
		t.Errorf("permission of %s looked up %d times within a minute, want 1", reader, got)
	}
	h.wantRuns(0, "a non-writer's commands")
}

// The replies fit the state: a busy reply names what runs, a typo on an
// issue awaiting approval says what the issue is waiting for and lists the
// issue's commands only, and a PR command on an issue says where it works.
func TestRepliesFitTheIssueState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	n := h.gh.AddIssue(testRepo, writer, "Busy", "")
	h.label(n, writer, "d-busy-state")
	plan := h.waitSubmitted(1)[0]
	h.waitComment(n, "ack", func(c string) bool { return strings.Contains(c, plan.Order.TaskID) })
	h.comment(n, writer, "/plan")
	busy := h.waitComment(n, "busy reply", func(c string) bool { return strings.Contains(c, "still running here") })
	if !strings.Contains(busy, "(a plan run)") || !strings.Contains(busy, "Wait for the plan to be posted") || !strings.Contains(busy, "`/plan`") {
		t.Errorf("busy reply must name the running plan run and the command:\n%s", busy)
	}
	golden(t, "busy_plan.md", busy)

	m, _ := h.planned("Awaiting")
	h.comment(m, writer, "/aprove")
	typo := h.waitComment(m, "did you mean", func(c string) bool { return strings.Contains(c, "Did you mean") })
	if !strings.Contains(typo, "The plan above is waiting") || strings.Contains(typo, "/rebase") {
		t.Errorf("a typo on an issue awaiting approval: want the next step and the issue's commands only:\n%s", typo)
	}
	h.comment(m, writer, "/rebase")
	wrong := h.waitComment(m, "wrong place", func(c string) bool { return strings.Contains(c, "works on the agent's pull request") })
	golden(t, "wrong_place_rebase.md", wrong)
	h.idle()
	if got := len(h.backend.Specs()); got != 2 || h.backend.Specs()[0].Order.TaskID != plan.Order.TaskID {
		t.Fatalf("replies must start nothing; runs: %d", got)
	}
}
