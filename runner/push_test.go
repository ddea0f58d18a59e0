package runner

import (
	"context"
	"strings"
	"testing"
)

// The runner pushes one explicit refspec to a branch: nothing a refspec
// could read as a force, a pair, an option, another ref namespace or a
// tag gets through, and a sha must be a full commit id.
func TestPushRefusesAnythingButOneBranch(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"agent/t-1-demo", "feature.x", "a_b-c/d"} {
		if err := checkBranchName(b); err != nil {
			t.Errorf("checkBranchName(%q) = %v, want nil", b, err)
		}
	}
	for _, b := range []string{"", "+main", "main:main", "-f", "--force", "refs/heads/main", "refs/tags/v1", "a..b",
		"a//b", "a/", "/a", "a.lock", "a.", "a b", "a~1", "a^", "HEAD@{1}", "a\\b", "*"} {
		if err := checkBranchName(b); err == nil {
			t.Errorf("checkBranchName(%q) = nil, want a refusal", b)
		}
	}
	g := newGit(gitConf{red: NewRedactor("")})
	sha := strings.Repeat("a", 40)
	cases := []struct{ sha, branch, lease, want string }{
		{"HEAD", "agent/x", "", "not a commit id"},
		{sha[:12], "agent/x", "", "not a commit id"},
		{sha, "agent/x", "origin/agent/x", "lease"},
		{sha, "refs/tags/v1", "", "not a branch name"},
		{sha, "+main", "", "not a branch name"},
	}
	for _, c := range cases {
		err := g.Push(context.Background(), c.sha, c.branch, c.lease)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Push(%q, %q, %q) = %v, want an error about %q", c.sha, c.branch, c.lease, err, c.want)
		}
	}
}
