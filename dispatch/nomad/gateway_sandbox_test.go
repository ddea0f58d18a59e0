package nomad_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// Claude Code in the real sandbox image, run as Nomad would run the job the
// backend builds (the fake agent's docker driver): the providers file is
// rendered from the run's Variable into secrets/gateway/ for the init
// alone, Claude Code reaches the scripted Anthropic server through the
// init's gateway, the server receives the key, and the agent finds it in no
// file, process environment or variable it can read.
func TestNomadGatewayKeepsTheProviderKeyFromClaudeCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real sandbox image")
	}
	img := testenv.SandboxImage(t)
	const key, project = "sk-ant-canary-nomad-claude-51c8e2", "proj-canary-nomad-7070"
	remote := runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	git := dockertest.ServeGit(t, remote.Dir, testToken)
	srv, err := modeltest.NewAnthropic(dockertest.Gateway(t)+":0", modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		{Usage: modeltest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}, ToolUses: []modeltest.AnthropicToolUse{
			{Name: "Bash", Input: map[string]any{"command": dockertest.KeySearch(key, project), "timeout": 170000}}}},
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
		o.Env = map[string]string{"PROJECT_TOKEN": project}
		o.Gateway = &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: "anthropic", BaseURL: srv.URL, API: dispatch.APIAnthropic, Key: key}}}
	})
	s := spec(dispatch.ModeExecute, "gateway-claude")
	cfg := sandboxcfg.Config{Harness: "claude-code", Model: modeltest.AnthropicModelID, InactivitySeconds: 240,
		Env: map[string]string{"PROJECT_TOKEN": "${PROJECT_TOKEN}"}}
	cfg.ApplyDefaults()
	s.Order.Config, s.Order.CloneURL, s.Order.SecretEnv = cfg, git.URL, []string{"PROJECT_TOKEN"}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
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
	for i, q := range srv.Requests() {
		if q.APIKey != key || q.Authorization != "" {
			t.Errorf("request %d %s reached the model with x-api-key %q authorization %q, want the gateway's key", i, q.Path, q.APIKey, q.Authorization)
		}
	}
	results := scripted[1].ToolResults()
	if len(results) != 1 {
		t.Fatalf("tool results: %+v", results)
	}
	dockertest.CheckSearch(t, key, results[0].Text)
	job := e.fake.Job("default", jobIDOf(s))
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
