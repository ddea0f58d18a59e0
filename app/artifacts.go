package app

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// ArtifactsConfig caps what the bot stores of a task run's artifacts on
// the branch agent-artifacts/<task-id>: sizes as "5MiB", "512KiB" or a
// number of bytes. Files over a cap are skipped and named in the result
// comment.
type ArtifactsConfig struct {
	// MaxFileSize is the largest file stored (SANDBOX_ARTIFACTS_MAX_FILE_SIZE).
	MaxFileSize string `yaml:"max_file_size"`
	// MaxTotalSize is the most stored per run (SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE).
	MaxTotalSize string `yaml:"max_total_size"`
	// MaxFiles is the most files stored per run (SANDBOX_ARTIFACTS_MAX_FILES);
	// each file that is not small text costs one write on GitHub.
	MaxFiles int `yaml:"max_files"`

	caps dispatch.ArtifactCaps
}

// load applies the environment over the file, fills the defaults and
// parses the sizes; errors name the setting.
func (a *ArtifactsConfig) load(getenv Getenv) error {
	if v, ok := getenv("SANDBOX_ARTIFACTS_MAX_FILE_SIZE"); ok {
		a.MaxFileSize = v
	}
	if v, ok := getenv("SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE"); ok {
		a.MaxTotalSize = v
	}
	if v, ok := getenv("SANDBOX_ARTIFACTS_MAX_FILES"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("SANDBOX_ARTIFACTS_MAX_FILES: %q is not a whole number of at least 1", v)
		}
		a.MaxFiles = n
	}
	a.caps = dispatch.DefaultArtifactCaps()
	for _, s := range []struct {
		name, value string
		dst         *int64
	}{
		{"artifacts.max_file_size (SANDBOX_ARTIFACTS_MAX_FILE_SIZE)", a.MaxFileSize, &a.caps.FileBytes},
		{"artifacts.max_total_size (SANDBOX_ARTIFACTS_MAX_TOTAL_SIZE)", a.MaxTotalSize, &a.caps.TotalBytes},
	} {
		if strings.TrimSpace(s.value) == "" {
			continue
		}
		n, err := humanize.ParseBytes(s.value)
		if err != nil || n == 0 || n > 1<<40 {
			return fmt.Errorf("%s: %q is not a size such as 5MiB", s.name, s.value)
		}
		*s.dst = int64(n)
	}
	if a.MaxFiles < 0 {
		return fmt.Errorf("artifacts.max_files: %d is not a whole number of at least 1", a.MaxFiles)
	}
	if a.MaxFiles > 0 {
		a.caps.MaxFiles = a.MaxFiles
	}
	return nil
}

// Caps are the caps load resolved.
func (a ArtifactsConfig) Caps() dispatch.ArtifactCaps { return a.caps }
