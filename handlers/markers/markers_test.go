package markers

import (
	"testing"

	"github.com/google/go-github/v62/github"
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
		issue, ok := IsAgentPR(c.pr, ownBot)
		if ok != c.want || (ok && issue != 3) {
			t.Errorf("%s: IsAgentPR = %d, %v; want %v", name, issue, ok, c.want)
		}
	}
	if _, ok := IsAgentPR(pr(ownBot, repo, "agent/t-1-x", marker), ""); ok {
		t.Error("with no known identity nothing is an agent PR")
	}
}

func TestCommentsOnlyFromOwnBot(t *testing.T) {
	t.Parallel()
	c := func(login, body string) *github.IssueComment {
		return &github.IssueComment{User: &github.User{Login: github.String(login)}, Body: github.String(body)}
	}
	plan := Marker{Kind: KindPlan, TaskID: "T-00000001"}.String()
	got := Comments([]*github.IssueComment{c("other-app[bot]", plan), c("alice", plan), c(ownBot, "no marker"), c(ownBot, plan)}, ownBot)
	if len(got) != 1 || got[0].Comment.GetUser().GetLogin() != ownBot {
		t.Fatalf("Comments kept %d comments, want only the App's marked one", len(got))
	}
}

func TestReviewsOnlyFromOwnBot(t *testing.T) {
	t.Parallel()
	r := func(login, body string) *github.PullRequestReview {
		return &github.PullRequestReview{User: &github.User{Login: github.String(login)}, Body: github.String(body)}
	}
	res := Marker{Kind: KindResult, TaskID: "T-00000001", Mode: "review"}.String()
	got := Reviews([]*github.PullRequestReview{r("other-app[bot]", res), r("alice", res), r(ownBot, "LGTM"), r(ownBot, res)}, ownBot)
	if len(got) != 1 || got[0].Review.GetUser().GetLogin() != ownBot || got[0].Marker.TaskID != "T-00000001" {
		t.Fatalf("Reviews kept %+v, want only the App's marked one", got)
	}
}

// A marker survives its rendering in a comment among other text, and a
// plan comment gives back exactly the plan it shows.
func TestMarkerRoundTrip(t *testing.T) {
	t.Parallel()
	m := Marker{Kind: KindAck, TaskID: "T-00000002", Round: 2, Vouch: &Vouch{By: "maya", Digest: "d"}, Images: []ImageNote{{Name: "a.png", Why: "too large"}}}
	body := "Working on it.\n\n" + m.String() + "\n"
	got, ok := Parse(body)
	if !ok || got.Kind != KindAck || got.TaskID != m.TaskID || got.Round != 2 || got.Vouch.By != "maya" || got.Images[0].Why != "too large" {
		t.Fatalf("Parse(%q) = %+v, %v", body, got, ok)
	}
	if _, ok := Parse("<!-- sandbox-bot:{not json} -->"); ok {
		t.Error("a marker that is not JSON parsed")
	}
	plan := "Intro\n" + PlanStart + "\n1. Do it\n" + PlanEnd + "\n/approve"
	if got := PlanText(plan); got != "1. Do it" {
		t.Errorf("PlanText = %q, want the text between the plan's markers", got)
	}
	marked := []Comment{{Marker: Marker{Kind: KindAck, TaskID: "T-1"}}, {Marker: Marker{Kind: KindAck, TaskID: "T-2"}}, {Marker: Marker{Kind: KindPlan, TaskID: "T-2"}}}
	if c, ok := Last(marked, KindAck, ""); !ok || c.Marker.TaskID != "T-2" {
		t.Errorf("Last(ack) = %+v, %v; want the newest acknowledgement", c, ok)
	}
	if c, ok := Last(marked, KindAck, "T-1"); !ok || c.Marker.TaskID != "T-1" {
		t.Errorf("Last(ack, T-1) = %+v, %v", c, ok)
	}
	if _, ok := Last(marked, KindResult, ""); ok {
		t.Error("Last found a kind no comment has")
	}
}
