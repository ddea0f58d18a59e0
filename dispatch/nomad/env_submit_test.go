package nomad_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// Submit and refresh both keep the sandbox environment in the run's
// Variable next to the token.
func TestSandboxEnvTravelsInTheVariable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	b := e.backend(func(o *nomad.Options) { o.Env = map[string]string{"ANTHROPIC_API_KEY": "sk-canary"} })
	s := spec(dispatch.ModeExecute, "env")
	if _, err := b.Submit(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	v := e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(s)))
	if v == nil || v.Items["env_ANTHROPIC_API_KEY"] != "sk-canary" || v.Items[nomad.TokenItem] != s.Token {
		t.Fatalf("variable items: %+v", v)
	}
	if err := b.RefreshToken(ctxT(t), s.Order.TaskID, "ghs_refreshed"); err != nil {
		t.Fatal(err)
	}
	v = e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(s)))
	if v.Items["env_ANTHROPIC_API_KEY"] != "sk-canary" || v.Items[nomad.TokenItem] != "ghs_refreshed" {
		t.Fatalf("after refresh: %+v", v.Items)
	}
}
