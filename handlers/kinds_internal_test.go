package handlers

import (
	"context"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// A cell that starts a new kind of run (lifecycle.StartRun) is a start
// request of that mode on the pull request's branch, with no code of its
// own in the handlers.
func TestANewKindOfRunIsRequestedFromItsCell(t *testing.T) {
	t.Parallel()
	const docs dispatch.Mode = "docs"
	sc := &scene{place: lifecycle.OnPR, state: lifecycle.PROpen, issue: 7, pr: &github.PullRequest{
		Head: &github.PullRequestBranch{Ref: github.String("agent/7-add-login")},
		Base: &github.PullRequestBranch{Ref: github.String("main")},
	}}
	th := thread{repo: &github.Repository{FullName: github.String("octo/hello")}, number: 8, isPR: true, sender: "maya", installation: 3}
	ev := event{kind: "/docs", cmd: &commands.Command{Name: "docs"}, trigger: "42"}
	req, ok := (&Base{}).runFor(context.Background(), th, ev, sc, lifecycle.StartRun(docs))
	if !ok {
		t.Fatal("runFor refused StartRun(docs)")
	}
	if req.Mode != docs || req.Issue != 7 || req.Number != 8 || !req.IsPR || req.Branch != "agent/7-add-login" || req.BaseBranch != "main" || req.Command != "docs" || req.Trigger != "42" {
		t.Errorf("request = %+v", req)
	}
}
