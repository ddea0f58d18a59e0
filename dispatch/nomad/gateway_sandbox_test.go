package nomad_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Claude Code in the real sandbox image, run as Nomad would run the job the
// backend builds (the fake agent's docker driver): the providers file is
// rendered from the run's Variable into secrets/gateway/ for the init
// alone, Claude Code reaches the scripted Anthropic server through the
// init's gateway, the server receives the key, and the agent finds it in no
// file, process environment or variable it can read.
func TestNomadGatewayKeepsTheProviderKeyFromClaudeCode(t *testing.T) {
	testenv.Long(t, "runs the real sandbox image")
	img := testenv.SandboxImage(t)
	const key = "sk-ant-canary-nomad-claude-51c8e2"
	s := spec(dispatch.ModeExecute, "gateway-claude")
	// The control the search must find: the run's id, in the sandbox's
	// environment (SANDBOX_TASK_ID) and so in the agent's.
	control := s.Order.TaskID
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	git := dockertest.ServeGit(t, remote.Dir, testToken)
	srv, err := modeltest.NewAnthropic(dockertest.Gateway(t)+":0", modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": dockertest.KeySearch(key, control), "timeout": 540000}}}},
		{Text: "Nothing to change.", Usage: modeltest.AnthropicUsage{InputTokens: 200, OutputTokens: 10}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	e := newEnv(t, nomadtest.Options{Driver: nomadtest.DockerDriver{ExtraArgs: []string{"--add-host", "host.docker.internal:host-gateway"}}})
	b := e.backend(func(o *nomad.Options) {
		o.Image = img
		o.Isolation = dispatch.IsolationCaps
		o.KillTimeout = 10 * time.Second
		o.Gateway = &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: "anthropic", BaseURL: srv.URL, API: dispatch.APIAnthropic, Key: key}}}
	})
	cfg := sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID, InactivitySeconds: 600}
	s.Order.Config, s.Order.CloneURL = sandboxcfg.MustResolve(cfg), git.URL

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, a := range e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s)) {
			for task, ts := range a.TaskStates {
				for _, ev := range ts.Events {
					t.Logf("task %s event %s: %s %s", task, ev.Type, ev.DisplayMessage, ev.DriverError)
				}
			}
			for _, stream := range []string{"stdout", "stderr"} {
				t.Logf("allocation %s %s:\n%s", a.ID, stream, allocLog(e, a.ID, stream))
			}
		}
	})
	st, err := b.Wait(ctx, s.Order.TaskID, func(dispatch.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Result(ctx, s.Order.TaskID)
	if err != nil {
		t.Fatalf("no result (state %+v): %v\n%s", st, err, e.logs.String())
	}
	scripted := srv.ScriptedRequests()
	if len(scripted) != 2 {
		t.Fatalf("scripted turns served: %d of 2 (status %s, %+v)", len(scripted), res.Status, res.Error)
	}
	srv.CheckCredential(t, key)
	results := scripted[1].ToolResults()
	if len(results) != 1 {
		t.Fatalf("tool results: %+v", results)
	}
	dockertest.CheckSearch(t, key, results[0].Text)
	job := e.fake.Job(nomad.DefaultNamespace, jobIDOf(s))
	if job == nil {
		t.Fatal("the job is gone")
	}
	for _, tmpl := range job.TaskGroups[0].Tasks[0].Templates {
		if tmpl.Envvars != nil && *tmpl.Envvars && strings.Contains(*tmpl.EmbeddedTmpl, nomad.GatewayItem) {
			t.Error("the providers file is rendered into the environment")
		}
	}
	if strings.Contains(e.logs.String(), key) {
		t.Error("the provider key reached the bot's log")
	}
}
