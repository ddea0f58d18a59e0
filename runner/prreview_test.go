package runner_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// A person's pull request: add.sh off by one on its branch, whose head
// GitHub keeps as refs/pull/7/head too.
func personsPR(t *testing.T) (*runtest.Remote, string) {
	t.Helper()
	remote := runtest.NewRemote(t, projectFiles())
	head := remote.Commit(t, "faster-add", "main", map[string]string{"add.sh": "#!/bin/sh\n# add A B prints A+B\necho $(( $1 + $2 + 1 ))\n"}, "Add faster")
	runtest.Git(t, remote.Dir, "update-ref", "refs/pull/7/head", head)
	return remote, head
}

// A review run checks the head out from refs/pull/N/head, runs the
// validation (which fails here), then the agent, whose final message is
// the review; nothing is pushed and the head is the receipt's.
func TestReviewRunsTheValidationOnThePRHead(t *testing.T) {
	t.Parallel()
	remote, head := personsPR(t)
	cfg := commandCfg(`prompt=$(cat)
case "$prompt" in *"expected 5, got 6"*) ;; *) echo "the failing check is not in the prompt"; exit 1;; esac
case "$prompt" in *"+echo \$(( \$1 + \$2 + 1 ))"*) ;; *) echo "the diff is not in the prompt"; exit 1;; esac
grep -q '+ 1' add.sh || { echo "not the PR's head"; exit 1; }
echo '{"type":"step_finish","tokens":{"input":100,"output":10},"cost_usd":0.01}'
echo 'add.sh:3: off by one.'`)
	cfg.Validate = checks("test", "sh test.sh")
	o := order(t, remote.URL, dispatch.ModeReview, cfg)
	o.TargetBranch = ""
	o.PR = &dispatch.PRReview{HeadRef: "refs/pull/7/head", HeadSHA: head, Diff: "diff --git a/add.sh b/add.sh\n-echo $(( $1 + $2 ))\n+echo $(( $1 + $2 + 1 ))\n"}
	res := run(t, newRunEnv(t, nil), o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if res.PRReview != "add.sh:3: off by one." || res.HeadSHA != head || len(res.Commits) != 0 {
		t.Fatalf("review %q, head %s (want %s), commits %+v", res.PRReview, res.HeadSHA, head, res.Commits)
	}
	if c := checkByName(res, "test"); c == nil || c.Passed || !strings.Contains(c.OutputTail, "expected 5, got 6") {
		t.Fatalf("the validation on the head: %+v", c)
	}
	if remote.SHA(t, "refs/heads/faster-add") != head {
		t.Fatal("a review moved the branch")
	}
}

// fixCfg is an agent that drops the off-by-one.
func fixCfg() sandboxcfg.Config {
	cfg := commandCfg(`cat > /dev/null
printf '#!/bin/sh\n# add A B prints A+B\necho $(( $1 + $2 ))\n' > add.sh
echo 'Dropped the + 1.'`)
	cfg.Validate = checks("test", "sh test.sh")
	return cfg
}

// A fix run on a person's branch: one commit on top of the head it was
// asked on, pushed once the checks pass; if the branch moved since, it
// changes nothing.
func TestFixPushesOneCommitOnThePersonsBranch(t *testing.T) {
	t.Parallel()
	remote, head := personsPR(t)
	o := order(t, remote.URL, dispatch.ModeFix, fixCfg())
	o.TargetBranch, o.PR = "faster-add", &dispatch.PRReview{HeadSHA: head}
	res := run(t, newRunEnv(t, nil), o)
	wantStatus(t, res, dispatch.StatusCompleted)
	now := remote.SHA(t, "refs/heads/faster-add")
	if got := runtest.Git(t, remote.Dir, "rev-list", head+".."+now); len(strings.Fields(got)) != 1 || res.HeadSHA != now {
		t.Fatalf("want one commit on top of %s, the receipt's head; got %q, head %s", head, got, res.HeadSHA)
	}
	if got, _ := remote.File(t, now, "add.sh"); strings.Contains(got, "+ 1") {
		t.Fatalf("add.sh after the fix:\n%s", got)
	}

	moved := remote.Commit(t, "faster-add", "", map[string]string{"NOTES.md": "mine\n"}, "Notes")
	res = run(t, newRunEnv(t, nil), o) // still asked on head
	wantStatus(t, res, dispatch.StatusFailed)
	if remote.SHA(t, "refs/heads/faster-add") != moved || !strings.Contains(res.Error.Message, "moved since the fix was asked for") {
		t.Fatalf("a fix of a branch that moved: head %s (want %s), %+v", remote.SHA(t, "refs/heads/faster-add"), moved, res.Error)
	}
}

// A suggest run (a fork's pull request) pushes nothing and hands back its
// change as a patch from the head.
func TestSuggestHandsBackAPatch(t *testing.T) {
	t.Parallel()
	remote, head := personsPR(t)
	o := order(t, remote.URL, dispatch.ModeSuggest, fixCfg())
	o.TargetBranch, o.PR = "", &dispatch.PRReview{HeadRef: "refs/pull/7/head", HeadSHA: head}
	res := run(t, newRunEnv(t, nil), o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if !strings.Contains(res.PRPatch, "-echo $(( $1 + $2 + 1 ))\n+echo $(( $1 + $2 ))") || !strings.Contains(res.PRPatch, "@@ -2,2 +2,2 @@") {
		t.Fatalf("patch:\n%s", res.PRPatch)
	}
	if remote.SHA(t, "refs/heads/faster-add") != head {
		t.Fatal("a suggest run moved the branch")
	}
}
