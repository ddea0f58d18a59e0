package nomad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

const (
	testImage = "registry.example/sandbox-bot/sandbox:1.4.2"
	testToken = "ghs_TESTTOKENx9Q2vL7secretvalue000001"
)

// spec is a run of mode on acme/web#42, its .sandbox.yml resolved the way
// the bot resolves it.
func spec(mode dispatch.Mode, trigger string) dispatch.RunSpec {
	cfg := sandboxcfg.Config{Name: "web", Validate: sandboxcfg.Checks{{Name: "test", Command: "go test ./..."}}}
	if mode == dispatch.ModeTask {
		cfg.Mode = sandboxcfg.ModeTask
	}
	resolved := sandboxcfg.MustResolve(cfg)
	id := dispatch.NewTaskID("acme/web", 42, mode, trigger)
	o := dispatch.WorkOrder{
		SchemaVersion:  dispatch.WorkOrderVersion,
		TaskID:         id,
		Mode:           mode,
		Attempt:        1,
		Task:           dispatch.TaskText{Title: "Add a dark mode toggle", Body: "Use {{ .Theme }} literally; it is not a template.", URL: "https://github.com/acme/web/issues/42"},
		Config:         resolved,
		BudgetUSD:      resolved.MaxBudgetUSD,
		TimeoutMinutes: resolved.TimeoutMinutes,
	}
	if mode != dispatch.ModeTask {
		o.Repo, o.Number = "acme/web", 42
		o.CloneURL = "https://github.com/acme/web.git"
		o.BaseBranch = "main"
	}
	if mode.WritesCode() {
		o.TargetBranch = dispatch.BranchName(id, o.Task.Title)
	}
	switch mode {
	case dispatch.ModeExecute, dispatch.ModeContinue:
		o.Plan = "1. Add a toggle.\n2. Persist the choice."
	case dispatch.ModeRevise:
		o.Feedback = "Use the system preference by default."
	}
	s := dispatch.RunSpec{
		Meta:  dispatch.Meta{TaskID: id, Mode: mode, Repo: o.Repo, Number: o.Number, InstallationID: 777, Attempt: 1, DeliveryID: "d-" + trigger},
		Order: o,
	}
	if mode != dispatch.ModeTask {
		s.Token = testToken
	}
	return s
}

type env struct {
	t    *testing.T
	fake *nomadtest.Server
	logs *testenv.Log
	// token is the bot's Nomad token.
	token string
}

// The fake's management token, and the bot's: a workload identity holding
// the policy an operator applies, deploy/nomad/sandbox-bot.policy.hcl.
const (
	managementToken = "nomadtest-management-token"
	botToken        = "sandbox-bot-workload-identity"
)

// deployPolicy is deploy/nomad/sandbox-bot.policy.hcl, as the fake
// enforces it.
func deployPolicy(t *testing.T) *nomadtest.Policy {
	t.Helper()
	p, err := nomadtest.ReadPolicy(filepath.Join("..", "..", "deploy", "nomad", "sandbox-bot.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newEnv starts a fake agent with the sandbox namespace and, unless the
// test sets its own token, ACLs on: every backend runs with the bot's
// policy, so each test holds the policy to what the backend needs.
func newEnv(t *testing.T, o nomadtest.Options) *env {
	t.Helper()
	if o.Heartbeat == 0 {
		o.Heartbeat = 50 * time.Millisecond
	}
	if o.Namespaces == nil {
		o.Namespaces = []string{nomad.DefaultNamespace}
	}
	token := o.ACLToken
	if o.ACLToken == "" && o.ACL == nil {
		o.ACLToken, token = managementToken, botToken
		o.ACL = map[string]*nomadtest.Policy{botToken: deployPolicy(t)}
	}
	fake, err := nomadtest.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	e := &env{t: t, fake: fake, logs: &testenv.Log{}, token: token}
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), testToken) {
			t.Errorf("the token reached the bot's logs:\n%s", e.logs.String())
		}
	})
	return e
}

// backend is one bot replica talking to the fake.
func (e *env) backend(mod ...func(*nomad.Options)) *nomad.Backend {
	e.t.Helper()
	c, err := e.fake.ClientAs("", e.token)
	if err != nil {
		e.t.Fatal(err)
	}
	o := nomad.Options{
		Client:   c,
		Image:    testImage,
		Logger:   zerolog.New(e.logs).Level(zerolog.DebugLevel),
		LogDrain: 5 * time.Second,
	}
	for _, m := range mod {
		m(&o)
	}
	b, err := nomad.New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.Close() })
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func jobIDOf(s dispatch.RunSpec) string {
	return nomad.JobID(nomad.DefaultJobPrefix, s.Order.TaskID, s.Order.Mode)
}

// renderedWorkOrder is the work order the fake rendered into a task's
// directory, as a fake runner reads it.
func renderedWorkOrder(t *nomadtest.Task) (dispatch.WorkOrder, error) {
	var order dispatch.WorkOrder
	raw, err := os.ReadFile(filepath.Join(t.TaskDir, "local", "work-order.json"))
	if err != nil {
		return order, err
	}
	if err := json.Unmarshal(raw, &order); err != nil {
		return order, fmt.Errorf("work order: %w", err)
	}
	return order, nil
}
