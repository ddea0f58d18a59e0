package nomad_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// execDriver runs a task until it is stopped, and answers an exec with
// the namespace of the allocation it ran in.
type execDriver struct{}

func (execDriver) Run(ctx context.Context, _ *nomadtest.Task) (int, error) {
	<-ctx.Done()
	return 0, nil
}

func (execDriver) Exec(_ context.Context, a *api.Allocation, _ string, _ []string, _ io.Reader, stdout, _ io.Writer) (int, error) {
	_, err := io.WriteString(stdout, "exec in "+a.Namespace)
	return 0, err
}

// Sandboxes run in a namespace of their own, and the bot's token, holding
// deploy/nomad/sandbox-bot.policy.hcl, reaches allocations there and
// nowhere else: in the bot's own namespace (where its own job runs) an
// exec is refused, its allocation is unknown to the bot, its job and
// variables unreadable, as Nomad answers. The run's token Variable is in
// the sandbox's namespace, where its job reads it; the bot's lock in its
// own.
func TestBotsExecReachesSandboxesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{Driver: execDriver{}})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "ns")
	if _, err := b.Lock(ctx, "acme/web#42", s.Order.TaskID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	if e.fake.Job(nomad.DefaultNamespace, jobIDOf(s)) == nil || e.fake.Job("default", jobIDOf(s)) != nil {
		t.Fatalf("the sandbox job is not (only) in namespace %s: %v, default %v", nomad.DefaultNamespace, e.fake.JobIDs(nomad.DefaultNamespace), e.fake.JobIDs("default"))
	}
	if e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(s))) == nil || e.fake.Var("default", nomad.LockPath("acme/web#42")) == nil {
		t.Fatal("the token Variable belongs in the sandbox's namespace, the lock in the bot's")
	}
	// The bot's own job, in its own namespace, as the operator runs it.
	mgmt, err := e.fake.Client("default")
	if err != nil {
		t.Fatal(err)
	}
	own := &api.Job{ID: ptr("sandbox-bot"), Name: ptr("sandbox-bot"), Type: ptr("service"), Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("bot"), Tasks: []*api.Task{{Name: "bot", Driver: "docker", Config: map[string]any{"image": "sandbox-bot/bot:local"}}}}}}
	if _, _, err := mgmt.Jobs().Register(own, nil); err != nil {
		t.Fatal(err)
	}
	sandboxAlloc := waitAlloc(t, e, nomad.DefaultNamespace, jobIDOf(s))
	botAlloc := waitAlloc(t, e, "default", "sandbox-bot")

	bot, err := e.fake.ClientAs("", e.token)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(allocID string) (string, error) {
		a := e.fake.Alloc(allocID)
		var out bytes.Buffer
		_, err := bot.Allocations().Exec(ctx, a, a.TaskGroup, false, []string{"sh"}, strings.NewReader(""), &out, io.Discard, nil,
			&api.QueryOptions{Namespace: a.Namespace})
		return out.String(), err
	}
	if out, err := exec(sandboxAlloc); err != nil || out != "exec in "+nomad.DefaultNamespace {
		t.Fatalf("exec in the sandbox: %q, %v", out, err)
	}
	if out, err := exec(botAlloc); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("exec in the bot's own allocation: %q, %v; want Permission denied", out, err)
	}
	if _, _, err := bot.Allocations().Info(botAlloc, nil); err == nil || !strings.Contains(err.Error(), "Unknown allocation") {
		t.Errorf("the bot read its own allocation: %v", err)
	}
	if _, _, err := bot.Jobs().Info("sandbox-bot", &api.QueryOptions{Namespace: "default"}); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("the bot read a job in its own namespace: %v", err)
	}
	if _, _, err := bot.Variables().Read("nomad/jobs/sandbox-bot", &api.QueryOptions{Namespace: "default"}); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("the bot read a job's Variable in its own namespace: %v", err)
	}
	// read-fs reads a sandbox's allocation directory, never a task's
	// secrets (its token).
	if _, err := bot.AllocFS().Cat(e.fake.Alloc(sandboxAlloc), nomad.TaskName+"/secrets/token", nil); err == nil || !strings.Contains(err.Error(), "Reading secret file prohibited") {
		t.Errorf("the bot read the sandbox's secrets/token: %v", err)
	}
	// A run looked up in another namespace is not found, even by a
	// management token.
	other := e.backend(func(o *nomad.Options) { o.Namespace, o.Client = "default", mgmt })
	if _, err := other.Status(ctx, s.Order.TaskID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("a backend on another namespace: %v, want not found", err)
	}
}

// Without the sandbox namespace, the bot is not ready and says what to
// do, and a submission fails with Nomad's own words.
func TestMissingSandboxNamespaceIsExplained(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{Namespaces: []string{}})
	b := e.backend()
	ctx := ctxT(t)
	errs := b.Ready(ctx)
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), `namespace sandboxes run in, "sandbox"`) || !strings.Contains(errs[0].Error(), "nomad namespace apply deploy/nomad/sandbox.namespace.hcl") {
		t.Fatalf("Ready = %v", errs)
	}
	if _, err := b.Submit(ctx, spec(dispatch.ModePlan, "nons")); err == nil || !strings.Contains(err.Error(), `nonexistent namespace "sandbox"`) {
		t.Fatalf("Submit = %v", err)
	}
}

func waitAlloc(t *testing.T, e *env, ns, jobID string) string {
	t.Helper()
	id, err := e.fake.WaitAlloc(ctxT(t), ns, jobID)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "allocation "+id+" running", func() bool { return e.fake.Alloc(id).ClientStatus == api.AllocClientStatusRunning })
	return id
}
