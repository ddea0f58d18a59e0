package app

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// OpsConfig is how the bot faces its operator and the network: the admin
// listener, webhook intake limits, HTTP timeouts, dispatch retries.
type OpsConfig struct {
	// AdminListen serves the dashboard, /metrics and a detailed /readyz,
	// never on the webhook listener: they list repositories and runs.
	// "off" disables it.
	AdminListen string `yaml:"admin_listen"`
	// MaxBodyReaders caps webhook bodies being read at once, before their
	// signature could be checked; over it a delivery is answered 503.
	MaxBodyReaders int `yaml:"max_body_readers"`
	// GitHubWritesPerMinute paces the bot's content-creating requests to
	// GitHub per installation, below GitHub's secondary limit (about 80).
	GitHubWritesPerMinute float64 `yaml:"github_writes_per_minute"`
	// HTTPReadTimeout, HTTPWriteTimeout and HTTPIdleTimeout bound a
	// request's reading, its answer, and an idle keep-alive connection.
	HTTPReadTimeout  time.Duration `yaml:"http_read_timeout"`
	HTTPWriteTimeout time.Duration `yaml:"http_write_timeout"`
	HTTPIdleTimeout  time.Duration `yaml:"http_idle_timeout"`
	// ClockFile, when set, is a file holding an RFC 3339 time that the
	// routines' scheduler takes as now instead of the system clock, so a
	// test of the assembled bot can advance it (clockfile.go). For tests
	// only.
	ClockFile string `yaml:"clock_file"`
	// The handlers' waits are read and defaulted with these (the
	// durations in handlers.Settings, which Config embeds):
	// dispatch_deadline bounds the retries of a submission that failed
	// for a passing reason; review_batch_window is how long review
	// feedback on an agent PR is collected into one revise run
	// (handlers/batch.go); result_retry is the first wait before posting
	// a refused result again, doubling up to two minutes
	// (handlers/postretry.go); preview_duration is how long a /preview
	// serves its dev server (handlers/preview.go).
}

// Defaults of OpsConfig.
const (
	DefaultAdminListen    = "127.0.0.1:9090"
	DefaultMaxBodyReaders = 64
	// DefaultDispatchDeadline bounds the retries of a failing submission.
	DefaultDispatchDeadline = 30 * time.Second
	// GitHub waits 10 s for an answer; a delivery's body is in well
	// before that or never.
	DefaultHTTPReadTimeout  = 15 * time.Second
	DefaultHTTPWriteTimeout = 30 * time.Second
	DefaultHTTPIdleTimeout  = 120 * time.Second
	// DefaultReviewBatchWindow: a reviewer's comments a few seconds apart
	// go into one revise run.
	DefaultReviewBatchWindow = 30 * time.Second
	// DefaultResultRetry: a GitHub hiccup passes within a second or two.
	DefaultResultRetry = time.Second
	// DefaultPreviewDuration: long enough to click through a change.
	DefaultPreviewDuration = 30 * time.Minute
	// DefaultHTTPHeaderTimeout bounds reading a request's headers.
	DefaultHTTPHeaderTimeout = 10 * time.Second
)

func (o *OpsConfig) applyEnv(getenv Getenv, runs *handlers.Settings) error {
	if v, ok := getenv("SANDBOX_ADMIN_LISTEN"); ok {
		o.AdminListen = strings.TrimSpace(v)
	}
	if v, ok := getenv("SANDBOX_CLOCK_FILE"); ok {
		o.ClockFile = strings.TrimSpace(v)
	}
	if v, ok := getenv("SANDBOX_MAX_BODY_READERS"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return fmt.Errorf("SANDBOX_MAX_BODY_READERS: %q is not a whole number of at least 1", v)
		}
		o.MaxBodyReaders = n
	}
	if v, ok := getenv("SANDBOX_GITHUB_WRITES_PER_MINUTE"); ok {
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("SANDBOX_GITHUB_WRITES_PER_MINUTE: %q is not a positive number", v)
		}
		o.GitHubWritesPerMinute = n
	}
	durations := map[string]*time.Duration{
		"SANDBOX_DISPATCH_DEADLINE": &runs.DispatchDeadline, "SANDBOX_HTTP_READ_TIMEOUT": &o.HTTPReadTimeout,
		"SANDBOX_HTTP_WRITE_TIMEOUT": &o.HTTPWriteTimeout, "SANDBOX_HTTP_IDLE_TIMEOUT": &o.HTTPIdleTimeout,
		"SANDBOX_REVIEW_BATCH_WINDOW": &runs.ReviewBatchWindow, "SANDBOX_RESULT_RETRY": &runs.ResultRetry,
		"SANDBOX_PREVIEW_DURATION": &runs.PreviewDuration,
	}
	for key, dst := range durations {
		v, ok := getenv(key)
		if !ok {
			continue
		}
		dur, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || dur <= 0 {
			return fmt.Errorf("%s: %q is not a positive duration such as 30s", key, v)
		}
		*dst = dur
	}
	return nil
}

func (o *OpsConfig) defaults(runs *handlers.Settings) {
	o.AdminListen = cmp.Or(o.AdminListen, DefaultAdminListen)
	o.MaxBodyReaders = cmp.Or(o.MaxBodyReaders, DefaultMaxBodyReaders)
	runs.DispatchDeadline = cmp.Or(runs.DispatchDeadline, DefaultDispatchDeadline)
	o.HTTPReadTimeout = cmp.Or(o.HTTPReadTimeout, DefaultHTTPReadTimeout)
	o.HTTPWriteTimeout = cmp.Or(o.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	o.HTTPIdleTimeout = cmp.Or(o.HTTPIdleTimeout, DefaultHTTPIdleTimeout)
	o.GitHubWritesPerMinute = cmp.Or(o.GitHubWritesPerMinute, DefaultGitHubWritesPerMinute)
	runs.ReviewBatchWindow = cmp.Or(runs.ReviewBatchWindow, DefaultReviewBatchWindow)
	runs.ResultRetry = cmp.Or(runs.ResultRetry, DefaultResultRetry)
	runs.PreviewDuration = cmp.Or(runs.PreviewDuration, DefaultPreviewDuration)
}
