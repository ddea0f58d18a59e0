package handlers

import (
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

const ownBot = "sandbox-bot[bot]"

func TestIsAgentPR(t *testing.T) {
	t.Parallel()
	repo := &github.Repository{ID: github.Int64(7), FullName: github.String("acme/app")}
	fork := &github.Repository{ID: github.Int64(8), FullName: github.String("mallory/app"), Fork: github.Bool(true)}
	marker := Marker{Kind: KindPR, TaskID: "T-00000001", Issue: 3}.String()
	pr := func(author string, head *github.Repository, ref, body string) *github.PullRequest {
		return &github.PullRequest{
			User: &github.User{Login: github.String(author)}, Body: github.String(body),
			Head: &github.PullRequestBranch{Ref: github.String(ref), Repo: head},
			Base: &github.PullRequestBranch{Ref: github.String("main"), Repo: repo},
		}
	}
	for name, c := range map[string]struct {
		pr   *github.PullRequest
		want bool
	}{
		"the App's own":                {pr(ownBot, repo, "agent/t-1-x", marker), true},
		"login case differs":           {pr("Sandbox-Bot[bot]", repo, "agent/t-1-x", marker), true},
		"another App":                  {pr("other-app[bot]", repo, "agent/t-1-x", marker), false},
		"a person with a copied body":  {pr("alice", repo, "agent/t-1-x", marker), false},
		"from a fork":                  {pr(ownBot, fork, "agent/t-1-x", marker), false},
		"head repository deleted":      {pr(ownBot, nil, "agent/t-1-x", marker), false},
		"same name, other id":          {pr(ownBot, &github.Repository{ID: github.Int64(9), FullName: github.String("acme/app")}, "agent/t-1-x", marker), false},
		"not an agent branch":          {pr(ownBot, repo, "feature/x", marker), false},
		"no marker":                    {pr(ownBot, repo, "agent/t-1-x", "Closes #3"), false},
		"another kind of marker":       {pr(ownBot, repo, "agent/t-1-x", Marker{Kind: KindPlan, TaskID: "T-00000001"}.String()), false},
		"identity unknown is no trust": {pr("", repo, "agent/t-1-x", marker), false},
	} {
		issue, ok := isAgentPR(c.pr, ownBot)
		if ok != c.want || (ok && issue != 3) {
			t.Errorf("%s: isAgentPR = %d, %v; want %v", name, issue, ok, c.want)
		}
	}
	if _, ok := isAgentPR(pr(ownBot, repo, "agent/t-1-x", marker), ""); ok {
		t.Error("with no known identity nothing is an agent PR")
	}
}

func TestMarkedCommentsOnlyFromOwnBot(t *testing.T) {
	t.Parallel()
	c := func(login, body string) *github.IssueComment {
		return &github.IssueComment{User: &github.User{Login: github.String(login)}, Body: github.String(body)}
	}
	plan := Marker{Kind: KindPlan, TaskID: "T-00000001"}.String()
	got := markedComments([]*github.IssueComment{c("other-app[bot]", plan), c("alice", plan), c(ownBot, "no marker"), c(ownBot, plan)}, ownBot)
	if len(got) != 1 || got[0].Comment.GetUser().GetLogin() != ownBot {
		t.Fatalf("markedComments kept %d comments, want only the App's marked one", len(got))
	}
}

func TestRefuseOncePerHour(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b := &gatekeeper{c: &core{Wiring: &Wiring{Now: func() time.Time { return now }}, trust: newTrustState()}}
	if !b.refuseOnce("acme/app", 1, "mallory") {
		t.Fatal("the first refusal must be sent")
	}
	now = now.Add(59 * time.Minute)
	if b.refuseOnce("acme/app", 1, "mallory") {
		t.Error("a second refusal within the hour")
	}
	if !b.refuseOnce("acme/app", 2, "mallory") || !b.refuseOnce("acme/app", 1, "eve") {
		t.Error("another issue or another person gets their own refusal")
	}
	now = now.Add(2 * time.Minute)
	if !b.refuseOnce("acme/app", 1, "mallory") {
		t.Error("after an hour the person is told again")
	}
}

func TestFlagOverCeiling(t *testing.T) {
	t.Parallel()
	b := &starter{c: &core{Wiring: &Wiring{Settings: Settings{Limits: sandboxcfg.Limits{}.WithDefaults()}}}}
	for name, c := range map[string]struct {
		flags   sandboxcfg.Flags
		setting string
	}{
		"within":         {sandboxcfg.Flags{BudgetUSD: 10, TimeoutMinutes: 120}, ""},
		"budget over":    {sandboxcfg.Flags{BudgetUSD: 500}, "limits.max_budget_usd"},
		"timeout over":   {sandboxcfg.Flags{TimeoutMinutes: 600}, "limits.max_timeout_minutes"},
		"nothing asked":  {sandboxcfg.Flags{}, ""},
		"just above $10": {sandboxcfg.Flags{BudgetUSD: 10.01}, "limits.max_budget_usd"},
	} {
		got, over := b.flagOverCeiling("approve", c.flags)
		if over != (c.setting != "") || got.Setting != c.setting {
			t.Errorf("%s: over=%v setting=%q, want %q", name, over, got.Setting, c.setting)
		}
	}
}
