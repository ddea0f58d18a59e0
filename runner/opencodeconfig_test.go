package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The operator's opencode.json arrives as a variable and leaves as a file
// OPENCODE_CONFIG names, replacing a host path that means nothing here.
func TestOpenCodeConfigEnv(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	doc := `{"provider":{"corp":{"options":{"baseURL":"http://llm:8080/v1","apiKey":"{env:CORP_KEY}"}}}}`
	env, err := openCodeConfigEnv([]string{"PATH=/bin", "OPENCODE_CONFIG=/home/op/opencode.json", dispatch.EnvOpenCodeConfigJSON + "=" + doc}, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(state, "opencode-operator.json")
	if got, _ := lookupEnv(env, "OPENCODE_CONFIG"); got != want {
		t.Fatalf("OPENCODE_CONFIG = %q, want %q", got, want)
	}
	if _, ok := lookupEnv(env, dispatch.EnvOpenCodeConfigJSON); ok || strings.Contains(strings.Join(env, "\n"), "/home/op/") {
		t.Fatalf("env still carries the variable or the host path: %q", env)
	}
	b, err := os.ReadFile(want)
	if err != nil || string(b) != doc {
		t.Fatalf("%s = %q, %v", want, b, err)
	}
	if fi, _ := os.Stat(want); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}

	// Without the variable nothing changes, the operator's own path included.
	plain := []string{"OPENCODE_CONFIG=/etc/opencode.json"}
	if env, err := openCodeConfigEnv(plain, state, nil); err != nil || len(env) != 1 || env[0] != plain[0] {
		t.Fatalf("env = %q, %v", env, err)
	}
	if _, err := openCodeConfigEnv([]string{dispatch.EnvOpenCodeConfigJSON + "={not json"}, state, nil); err == nil || !strings.Contains(err.Error(), dispatch.EnvOpenCodeConfigJSON+" is not a JSON object") {
		t.Fatalf("bad JSON: %v", err)
	}
}
