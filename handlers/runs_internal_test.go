package handlers

import (
	"strings"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// The continuation of an interrupted run goes through the one start path,
// as the next attempt on the run's branch (its own agent/<task-id>-
// branch), the run's lock passing to it.
func TestRunsContinueThroughTheStartPath(t *testing.T) {
	t.Parallel()
	const repo = "octo-org/hello"
	gh := githubtest.New(t, githubtest.Options{})
	gh.AddRepo(repo, 42, map[string]string{"main.go": "package main\n"})
	n := gh.AddIssue(repo, "alice", "Add a login page", "")
	var ghCfg githubapp.Config
	ghCfg.V3APIURL, ghCfg.App.IntegrationID, ghCfg.App.PrivateKey = gh.URL(), 1, githubtest.AppKey()
	cc, err := githubapp.NewDefaultCachingClientCreator(ghCfg)
	if err != nil {
		t.Fatal(err)
	}
	backend := backendtest.NewMemory()
	b, err := NewBase(Wiring{ClientCreator: cc, Backend: backend, Templates: templates.MustLoadEmbedded(), Settings: Settings{
		TriggerLabel: "agent", MaxContinues: 2, MaxPlanRounds: 5, ProgressInterval: time.Millisecond, TokenRefresh: time.Hour,
		DispatchDeadline: time.Second, CheckName: "sandbox-agent", WebURL: "https://github.com", Isolation: dispatch.IsolationCaps, ReviewBatchWindow: time.Second, ResultRetry: time.Second, PreviewDuration: time.Minute,
		Limits: sandboxcfg.Limits{}.WithDefaults(), ArtifactCaps: dispatch.DefaultArtifactCaps(), CILogBytes: 8 << 10,
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Runs
	defer r.Stop()

	meta := dispatch.Meta{TaskID: "T-0000000000000abc", Repo: repo, Number: n, Mode: dispatch.ModeExecute, InstallationID: 42, Attempt: 1, DeliveryID: "d-1"}
	key := dispatch.LockKey(repo, n)
	if _, err := backend.Lock(t.Context(), key, meta.TaskID); err != nil {
		t.Fatal(err)
	}
	repoGH, err := b.c.Hub.Repo(42, repo)
	if err != nil {
		t.Fatal(err)
	}
	res := &dispatch.Result{TaskID: meta.TaskID, Mode: meta.Mode, Status: dispatch.StatusInterrupted, Branch: "agent/" + strings.ToLower(meta.TaskID) + "-add-a-login-page",
		Commits: []dispatch.Commit{{SHA: "0123abc", Message: "half a login page"}}}
	prog := r.Progress(t.Context(), repoGH, meta)
	if err := b.ends.finish(t.Context(), repoGH, meta, res, prog); err != nil {
		t.Fatal(err)
	}
	specs, err := backend.WaitSubmitted(t.Context(), 1)
	if err != nil || len(specs) != 1 {
		t.Fatalf("the continuation was submitted %d times (%v), want once", len(specs), err)
	}
	cont := specs[0]
	want := dispatch.NewTaskID(repo, n, dispatch.ModeContinue, meta.TaskID+"-continue-1")
	if m := cont.Meta; m.Mode != dispatch.ModeContinue || m.Attempt != 2 || m.TaskID != want || m.Number != n || m.Repo != repo || cont.Order.TargetBranch != res.Branch {
		t.Errorf("continuation %+v on branch %q, want task %s, attempt 2 on %s", m, cont.Order.TargetBranch, want, res.Branch)
	}
	if holder, err := backend.Holder(t.Context(), key); err != nil || holder != want {
		t.Errorf("the issue's lock is held by %q (%v); it passes from the interrupted run to its continuation %s", holder, err, want)
	}
}
