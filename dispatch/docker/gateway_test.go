package docker

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The provider keys go to secrets/gateway/providers.json, root-only in a
// coding sandbox; neither the env file, the work order nor the docker
// command line holds them.
func TestGatewayFileHoldsTheKeysAndNothingElseDoes(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-canary-docker-0123456789"
	gw := &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{{Name: "anthropic", BaseURL: "https://api.anthropic.com", API: dispatch.APIAnthropic, Key: key}}}
	for _, task := range []bool{false, true} {
		b := unitBackend(t, func(o *Options) { o.Gateway = gw; o.Env = map[string]string{"NPM_TOKEN": "npm-1"} })
		mode := dispatch.ModeExecute
		if task {
			mode = dispatch.ModeTask
		}
		spec := testSpec(mode)
		order := spec.Order
		order.OutputDir, order.GatewayFile = dispatch.OutputDir, b.gatewayFile()
		dir := b.TaskDir(spec.Meta.TaskID)
		if err := b.writeTaskDir(dir, order, spec.Token, task); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "secrets", "gateway", dispatch.GatewayFileName)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dispatch.ParseGatewayConfig(raw)
		if err != nil || len(got.Providers) != 1 || got.Providers[0].Key != key {
			t.Fatalf("task=%v: providers file = %s, %v", task, raw, err)
		}
		if order.GatewayFile != "/sandbox/secrets/gateway/providers.json" {
			t.Errorf("work order gateway_file = %q", order.GatewayFile)
		}
		st, _ := os.Stat(p)
		if st.Mode().Perm() != 0o400 && os.Geteuid() == 0 {
			t.Errorf("task=%v: providers file mode %v, want 0400", task, st.Mode().Perm())
		}
		if os.Geteuid() == 0 {
			owner := int(st.Sys().(*syscall.Stat_t).Uid)
			want := 0
			if task {
				want = b.o.SandboxUID
			}
			if owner != want {
				t.Errorf("task=%v: providers file owned by %d, want %d", task, owner, want)
			}
		}
		args, err := b.runArgs(record{Meta: spec.Meta, Container: "c", Isolation: dispatch.IsolationCaps}, order, dir, task)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]string{"command line": strings.Join(args, " "), "env file": readString(t, filepath.Join(dir, "env")), "work order": readString(t, filepath.Join(dir, "work-order.json"))} {
			if strings.Contains(s, key) {
				t.Errorf("task=%v: the %s holds the provider key", task, name)
			}
		}
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
