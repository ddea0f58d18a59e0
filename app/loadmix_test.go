package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/loadtest"
)

// loadEvent is one kind of delivery in the load test's mix.
type loadEvent struct {
	event string
	// file is a recorded payload: in githubtest/payloads, or with a
	// "examples:" prefix the first example of that event and action in
	// @octokit/webhooks-examples.
	file   string
	mutate func(map[string]any)
	// weight is how many of every 20 deliveries are of this kind.
	weight int
}

// loadMix is what a busy organisation sends a bot installed org-wide, per
// 20 deliveries: mostly conversation, labels, pushes and CI the bot never
// acts on, some of it the bot's own comments, and approvals of agent PRs
// that reach a worker (which decodes them in full and returns without
// calling GitHub, so the fake GitHub stays out of the figures; an inline
// comment on an agent PR would start a review batch, which asks GitHub).
var loadMix = []loadEvent{
	{event: "issue_comment", file: "issue_comment.created.json", weight: 5},
	{event: "issue_comment", file: "issue_comment.created.json", weight: 2, mutate: func(m map[string]any) {
		m["sender"] = map[string]any{"login": "sandbox-bot[bot]", "type": "Bot"}
		m["comment"].(map[string]any)["body"] = "Plan ready for review. A writer can reply `/approve` or `/revise <feedback>`."
	}},
	{event: "issue_comment", file: "issue_comment.edited.json", weight: 1},
	{event: "issues", file: "issues.labeled.json", weight: 3},
	{event: "push", file: "push.json", weight: 2},
	{event: "check_run", file: "check_run.rerequested.json", weight: 1},
	{event: "pull_request_review_comment", file: "pull_request_review_comment.created.json", weight: 1},
	{event: "pull_request_review", file: "pull_request_review.submitted.json", weight: 2, mutate: approvedOnAgentPR},
	{event: "pull_request", file: "examples:pull_request.opened", weight: 1},
	{event: "status", file: "examples:status", weight: 1},
	{event: "workflow_run", file: "examples:workflow_run.completed", weight: 1},
}

// approvedOnAgentPR makes a submitted review an approval of an agent PR.
func approvedOnAgentPR(m map[string]any) {
	m["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = "agent/T-0A1B2C3D-fix-the-thing"
	m["review"].(map[string]any)["state"] = "approved"
}

// loadMessages signs the mix's payloads in their proportions, interleaved
// (kinds take turns, so no burst is of one kind), and describes it.
func loadMessages(t testing.TB) ([]loadtest.Message, string) {
	t.Helper()
	bodies := make([][]byte, len(loadMix))
	var desc []string
	for i, e := range loadMix {
		raw := loadPayload(t, e.file)
		if e.mutate != nil {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s: %v", e.file, err)
			}
			e.mutate(m)
			var err error
			if raw, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		bodies[i] = raw
		desc = append(desc, fmt.Sprintf("%d %s (%s, %d B)", e.weight, e.event, strings.TrimPrefix(e.file, "examples:"), len(raw)))
	}
	var out []loadtest.Message
	for round := 0; len(out) < 20; round++ {
		for i, e := range loadMix {
			if round < e.weight {
				out = append(out, loadtest.Message{Body: bodies[i], Header: map[string]string{
					"X-GitHub-Event": e.event, loadtest.SignatureHeader: loadtest.Sign(bodies[i], []byte(testSecret)),
				}})
			}
		}
	}
	return out, "per 20 deliveries: " + strings.Join(desc, ", ")
}

func loadPayload(t testing.TB, file string) []byte {
	t.Helper()
	name, ok := strings.CutPrefix(file, "examples:")
	if !ok {
		return readPayload(t, file)
	}
	event, action, _ := strings.Cut(name, ".")
	for _, ex := range githubtest.Examples(t)[event] {
		var head struct {
			Action string `json:"action"`
		}
		if json.Unmarshal(ex, &head) == nil && head.Action == action {
			return ex
		}
	}
	t.Fatalf("@octokit/webhooks-examples has no %s example", name)
	return nil
}
