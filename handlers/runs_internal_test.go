package handlers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Runs holds no Base: the continuation of an interrupted run goes through
// the start function it was given, as the next attempt on the run's
// branch (its own agent/<task-id>- branch), with the run's lock released
// for it.
func TestRunsContinueThroughTheirStartFunction(t *testing.T) {
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
	b, err := NewBase(cc, Settings{
		TriggerLabel: "agent", MaxContinues: 2, MaxPlanRounds: 5, ProgressInterval: time.Millisecond, TokenRefresh: time.Hour,
		DispatchDeadline: time.Second, CheckName: "sandbox-agent", WebURL: "https://github.com", Isolation: dispatch.IsolationCaps, ReviewBatchWindow: time.Second, ResultRetry: time.Second, PreviewDuration: time.Minute,
		Limits: sandboxcfg.Limits{}.WithDefaults(), ArtifactCaps: dispatch.DefaultArtifactCaps(), CILogBytes: 8 << 10,
	}, backend, templates.MustLoadEmbedded())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var started []startRequest
	r := newRuns(b.c, func(_ context.Context, _ hub.GitHub, req startRequest) error {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, req)
		return nil
	})
	defer r.Stop()

	meta := dispatch.Meta{TaskID: "T-0000000000000abc", Repo: repo, Number: n, Mode: dispatch.ModeExecute, InstallationID: 42, Attempt: 1, DeliveryID: "d-1"}
	key := dispatch.LockKey(repo, n)
	if _, err := backend.Lock(t.Context(), key, meta.TaskID); err != nil {
		t.Fatal(err)
	}
	repoGH, err := b.c.hub.Repo(42, repo)
	if err != nil {
		t.Fatal(err)
	}
	res := &dispatch.Result{TaskID: meta.TaskID, Mode: meta.Mode, Status: dispatch.StatusInterrupted, Branch: "agent/" + strings.ToLower(meta.TaskID) + "-add-a-login-page",
		Commits: []dispatch.Commit{{SHA: "0123abc", Message: "half a login page"}}}
	prog := newProgress(t.Context(), b.c, repoGH, meta)
	if err := r.finish(t.Context(), repoGH, meta, res, prog); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 1 {
		t.Fatalf("start function called %d times, want once: %+v", len(started), started)
	}
	req := started[0]
	if req.Mode != dispatch.ModeContinue || req.Attempt != 2 || req.Branch != res.Branch || req.Trigger != meta.TaskID+"-continue-1" || req.Number != n || req.Repo.GetFullName() != repo {
		t.Errorf("continue request %+v", req)
	}
	if holder, err := backend.Holder(t.Context(), key); err != nil || holder != "" {
		t.Errorf("the interrupted run's lock is held by %q (%v); it passes to the continuation", holder, err)
	}
}
