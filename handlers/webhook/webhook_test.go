package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/handlers/webhook"
)

// engine records what the adapters hand the engine, one line per call.
type engine struct{ calls []string }

func (e *engine) record(format string, a ...any) error {
	e.calls = append(e.calls, fmt.Sprintf(format, a...))
	return nil
}

func (e *engine) Label(_ context.Context, d handlers.Delivery) error {
	return e.record("Label %s#%d by %s (delivery %s)", d.Repo.GetFullName(), d.Number, d.Sender, d.ID)
}
func (e *engine) Comment(_ context.Context, d handlers.Delivery, body string) error {
	return e.record("Comment %s#%d pr=%t by %s comment %d: %s", d.Repo.GetFullName(), d.Number, d.IsPR, d.Sender, d.CommentID, body)
}
func (e *engine) Feedback(_ context.Context, d handlers.Delivery, body, trigger string, thread int64) error {
	return e.record("Feedback %s#%d by %s %s thread %d: %s", d.Repo.GetFullName(), d.Number, d.Sender, trigger, thread, body)
}
func (e *engine) Opened(_ context.Context, d handlers.Delivery) error {
	return e.record("Opened %s#%d by %s", d.Repo.GetFullName(), d.Number, d.Sender)
}
func (e *engine) Closed(_ context.Context, d handlers.Delivery) error {
	return e.record("Closed %s#%d", d.Repo.GetFullName(), d.Number)
}
func (e *engine) Rerun(_ context.Context, d handlers.Delivery, externalID string) error {
	return e.record("Rerun %s by %s check run %d: %s", d.Repo.GetFullName(), d.Sender, d.CommentID, externalID)
}
func (e *engine) ChecksChanged(_ context.Context, d handlers.Delivery, sha, branch string, numbers []int) error {
	return e.record("ChecksChanged %s %s %s %v", d.Repo.GetFullName(), sha[:7], branch, numbers)
}
func (e *engine) MainChecks(_ context.Context, d handlers.Delivery, sha string) error {
	return e.record("MainChecks %s %s", d.Repo.GetFullName(), sha[:7])
}
func (e *engine) Pushed(_ context.Context, d handlers.Delivery, branch, after string) error {
	return e.record("Pushed %s %s %s default %s", d.Repo.GetFullName(), branch, after[:7], d.Repo.GetDefaultBranch())
}
func (e *engine) Installed(_ context.Context, installation int64, repos []*github.Repository) error {
	return e.record("Installed %d %s", installation, names(repos))
}
func (e *engine) Removed(_ context.Context, installation int64, repos []*github.Repository) error {
	return e.record("Removed %d %s", installation, names(repos))
}
func (e *engine) Uninstalled(_ context.Context, installation int64) error {
	return e.record("Uninstalled %d", installation)
}
func (e *engine) IgnoredSender(u *github.User) bool { return u.GetType() == "Bot" }
func (e *engine) MayAddress(body []byte) bool {
	return bytes.ContainsAny(body, "/") || bytes.Contains(body, []byte("@sandbox-bot"))
}
func (e *engine) OwnApp(slug string) bool { return slug == "sandbox-bot" }
func (e *engine) TriggerLabel() string    { return "agent" }
func (e *engine) CheckName() string       { return "sandbox-bot" }

func names(repos []*github.Repository) string {
	var s []string
	for _, r := range repos {
		s = append(s, r.GetFullName())
	}
	return strings.Join(s, ",")
}

// payload is a recorded payload of GitHub's (app/githubtest/payloads),
// with the fields at the dotted paths set.
func payload(t *testing.T, name string, set map[string]any) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "app", "githubtest", "payloads", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for path, v := range set {
		keys := strings.Split(path, ".")
		at := m
		for _, k := range keys[:len(keys)-1] {
			next, ok := at[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[k] = next
			}
			at = next
		}
		at[keys[len(keys)-1]] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Each adapter hands the engine what it is for, with what the payload
// says, and nothing else: the filters a delivery passes before the engine
// acts are the adapters'. The pre-filter the intake runs (MayAct) keeps
// every delivery an adapter hands on.
func TestAdaptersHandTheEngineWhatTheyAreFor(t *testing.T) {
	bot := map[string]any{"login": "other-app[bot]", "type": "Bot"}
	cases := []struct {
		name, event, payload string
		set                  map[string]any
		want                 string // "" for nothing
	}{
		{"the trigger label", "issues", "issues.labeled", map[string]any{"label.name": "agent"}, "Label Codertocat/Hello-World#1 by Codertocat (delivery d1)"},
		{"another label", "issues", "issues.labeled", nil, ""},
		{"the trigger label by a bot", "issues", "issues.labeled", map[string]any{"label.name": "agent", "sender": bot}, ""},
		{"a command", "issue_comment", "issue_comment.created", map[string]any{"comment.body": "/approve"}, "Comment Codertocat/Hello-World#1 pr=false by Codertocat comment 492700400: /approve"},
		{"a mention on a pull request", "issue_comment", "issue_comment.created", map[string]any{"comment.body": "@sandbox-bot look", "issue.pull_request": map[string]any{"url": "x"}}, "Comment Codertocat/Hello-World#1 pr=true by Codertocat comment 492700400: @sandbox-bot look"},
		{"conversation", "issue_comment", "issue_comment.created", map[string]any{"comment.body": "thanks!"}, ""},
		{"an edited command", "issue_comment", "issue_comment.edited", map[string]any{"comment.body": "/approve"}, ""},
		{"a bot's command", "issue_comment", "issue_comment.created", map[string]any{"comment.body": "/approve", "sender": bot}, ""},
		{"a person's pull request opened", "pull_request", "pull_request.closed", map[string]any{"action": "opened"}, "Opened Codertocat/Hello-World#2 by Codertocat"},
		{"made ready for review", "pull_request", "pull_request.closed", map[string]any{"action": "ready_for_review"}, "Opened Codertocat/Hello-World#2 by Codertocat"},
		{"a draft opened", "pull_request", "pull_request.closed", map[string]any{"action": "opened", "pull_request.draft": true}, ""},
		{"the App's own opened", "pull_request", "pull_request.closed", map[string]any{"action": "opened", "pull_request.head.ref": "agent/T-1-x"}, ""},
		{"an agent PR closed", "pull_request", "pull_request.closed", map[string]any{"pull_request.head.ref": "agent/T-1-x"}, "Closed Codertocat/Hello-World#2"},
		{"a person's PR closed", "pull_request", "pull_request.closed", nil, ""},
		{"a pull request edited", "pull_request", "pull_request.closed", map[string]any{"action": "edited"}, ""},
		{"changes requested on an agent PR", "pull_request_review", "pull_request_review.submitted", map[string]any{"review.state": "changes_requested", "pull_request.head.ref": "agent/T-1-x"}, "Feedback Codertocat/Hello-World#2 by Codertocat review-237895671 thread 0: "},
		{"a review with a body on an agent PR", "pull_request_review", "pull_request_review.submitted", map[string]any{"review.body": "/abort", "pull_request.head.ref": "agent/T-1-x"}, "Feedback Codertocat/Hello-World#2 by Codertocat review-237895671 thread 0: /abort"},
		{"an approval", "pull_request_review", "pull_request_review.submitted", map[string]any{"review.state": "approved", "review.body": "nice", "pull_request.head.ref": "agent/T-1-x"}, ""},
		{"the wrapper of inline comments", "pull_request_review", "pull_request_review.submitted", map[string]any{"pull_request.head.ref": "agent/T-1-x"}, ""},
		{"changes requested on a person's PR", "pull_request_review", "pull_request_review.submitted", map[string]any{"review.state": "changes_requested"}, ""},
		{"an inline comment on an agent PR", "pull_request_review_comment", "pull_request_review_comment.created", map[string]any{"comment.body": "use a map", "pull_request.head.ref": "agent/T-1-x"}, "Feedback Codertocat/Hello-World#2 by Codertocat inline-284312630 thread 284312630: use a map"},
		{"a reply inline", "pull_request_review_comment", "pull_request_review_comment.created", map[string]any{"comment.body": "and here", "comment.in_reply_to_id": 7, "pull_request.head.ref": "agent/T-1-x"}, "Feedback Codertocat/Hello-World#2 by Codertocat inline-284312630 thread 7: and here"},
		{"a command inline on a person's PR", "pull_request_review_comment", "pull_request_review_comment.created", map[string]any{"comment.body": "/fix"}, "Feedback Codertocat/Hello-World#2 by Codertocat inline-284312630 thread 284312630: /fix"},
		{"conversation inline on a person's PR", "pull_request_review_comment", "pull_request_review_comment.created", map[string]any{"comment.body": "looks odd"}, ""},
		{"Re-run of the App's check", "check_run", "check_run.rerequested", map[string]any{"check_run.name": "sandbox-bot", "check_run.external_id": "T-1:github/hello-world#3:plan"}, "Rerun github/hello-world by octocat check run 4: T-1:github/hello-world#3:plan"},
		{"Re-run of another check", "check_run", "check_run.rerequested", nil, ""},
		{"an agent branch's suite", "check_suite", "check_suite.completed", map[string]any{"check_suite.head_branch": "agent/T-1-x"}, "ChecksChanged Codertocat/Hello-World ec26c3e agent/T-1-x [2]"},
		{"the default branch's suite", "check_suite", "check_suite.completed", map[string]any{"check_suite.head_branch": "master"}, "MainChecks Codertocat/Hello-World ec26c3e"},
		{"the App's own suite", "check_suite", "check_suite.completed", map[string]any{"check_suite.head_branch": "agent/T-1-x", "check_suite.app.slug": "sandbox-bot"}, ""},
		{"a person's branch's suite", "check_suite", "check_suite.completed", nil, ""},
		{"a status on the default and an agent branch", "status", "status", map[string]any{"branches": []any{map[string]any{"name": "master"}, map[string]any{"name": "agent/T-1-x"}}}, "MainChecks Codertocat/Hello-World 6113728|ChecksChanged Codertocat/Hello-World 6113728 agent/T-1-x []"},
		{"a pending status", "status", "status", map[string]any{"state": "pending"}, ""},
		{"a push to the default branch", "push", "push", map[string]any{"ref": "refs/heads/master"}, "Pushed Codertocat/Hello-World master 6113728 default master"},
		{"a push to an agent branch", "push", "push", map[string]any{"ref": "refs/heads/agent/T-1-x"}, ""},
		{"a tag", "push", "push", nil, ""},
		{"a branch deleted", "push", "push", map[string]any{"ref": "refs/heads/feature", "deleted": true}, ""},
		{"installed", "installation", "installation.created", nil, "Installed 957387 Codertocat/Hello-World"},
		{"uninstalled", "installation", "installation.deleted", nil, "Uninstalled 2"},
		{"repositories added", "installation_repositories", "installation_repositories.added", nil, "Installed 957387 Codertocat/Space"},
		{"repositories removed", "installation_repositories", "installation_repositories.removed", nil, "Removed 2 octocat/Hello-World"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &engine{}
			hooks := webhook.New(e)
			body := payload(t, tc.payload, tc.set)
			handled := false
			for _, h := range hooks.Handlers() {
				for _, ev := range h.Handles() {
					if ev != tc.event {
						continue
					}
					handled = true
					if err := h.Handle(t.Context(), ev, "d1", body); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !handled {
				t.Fatalf("no adapter handles %s", tc.event)
			}
			if got := strings.Join(e.calls, "|"); got != tc.want {
				t.Errorf("the engine was handed\n %q\nwant\n %q", got, tc.want)
			}
			v, err := fastjson.ParseBytes(body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !hooks.MayAct(tc.event, v) {
				t.Errorf("MayAct drops a delivery the adapter hands the engine")
			}
		})
	}
}
