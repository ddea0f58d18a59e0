package app_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The artifact caps: defaults, the file, the environment over the file,
// and one clear line for a bad value.
func TestArtifactCapsSettings(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Artifacts.Caps(); got != dispatch.DefaultArtifactCaps() {
		t.Errorf("defaults %+v; want %+v", got, dispatch.DefaultArtifactCaps())
	}
	if d := dispatch.DefaultArtifactCaps(); d.FileBytes != 5<<20 || d.TotalBytes != 20<<20 {
		t.Errorf("default caps %+v; want 5 MiB per file and 20 MiB in all", d)
	}

	file := writeServerConfig(t, "artifacts:\n  max_file_size: 1MiB\n  max_total_size: 3 MiB\n  max_files: 7\n")
	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": file, "SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE": "512KiB"})))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Artifacts.Caps(), (dispatch.ArtifactCaps{FileBytes: 1 << 20, TotalBytes: 512 << 10, MaxFiles: 7}); got != want {
		t.Errorf("caps %+v; want %+v", got, want)
	}

	for env, name := range map[string]string{
		"SANDBOX_ARTIFACTS_MAX_FILE_SIZE":  "SANDBOX_ARTIFACTS_MAX_FILE_SIZE",
		"SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE": "SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE",
		"SANDBOX_ARTIFACTS_MAX_FILES":      "SANDBOX_ARTIFACTS_MAX_FILES",
	} {
		for _, bad := range []string{"lots", "0", "-3"} {
			_, err := app.LoadConfig(lookup(appEnv(map[string]string{env: bad})))
			if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s=%s: %v; want one line naming %s", env, bad, err, name)
			}
		}
	}
}
