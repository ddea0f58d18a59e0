package app_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Caps come from the file's `caps` and the SANDBOX_MAX_RUNS* variables,
// env over file; absent means no cap.
func TestLoadConfigCaps(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Caps != (dispatch.Caps{}) || c.Caps.Any() {
		t.Errorf("caps without settings = %+v, want none", c.Caps)
	}
	path := writeServerConfig(t, "caps: { global: 10, per_installation: 4, per_repo: 2 }\n")
	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": path, "SANDBOX_MAX_RUNS_PER_REPO": "1"})))
	if err != nil {
		t.Fatal(err)
	}
	if want := (dispatch.Caps{Global: 10, PerInstallation: 4, PerRepo: 1}); c.Caps != want {
		t.Errorf("caps = %+v, want %+v (per_repo from the environment)", c.Caps, want)
	}
	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_MAX_RUNS": "3", "SANDBOX_MAX_RUNS_PER_INSTALLATION": "0"})))
	if err != nil || c.Caps != (dispatch.Caps{Global: 3}) {
		t.Errorf("caps from the environment = %+v, %v", c.Caps, err)
	}
}

func TestLoadConfigBadCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		file string
		want string
	}{
		{env: map[string]string{"SANDBOX_MAX_RUNS": "two"}, want: "SANDBOX_MAX_RUNS:"},
		{env: map[string]string{"SANDBOX_MAX_RUNS_PER_REPO": "-1"}, want: "SANDBOX_MAX_RUNS_PER_REPO:"},
		{file: "caps: { per_installation: -2 }\n", want: "caps.per_installation"},
		{file: "caps: { per_repository: 2 }\n", want: "per_repository"},
	} {
		env := tc.env
		if tc.file != "" {
			env = map[string]string{"SANDBOX_CONFIG": writeServerConfig(t, tc.file)}
		}
		_, err := app.LoadConfig(lookup(appEnv(env)))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("LoadConfig(%v %q) = %v; want one line naming %s", tc.env, tc.file, err, tc.want)
		}
	}
}
