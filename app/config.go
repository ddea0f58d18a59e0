// Package app wires the sandbox-bot server: configuration, the GitHub client
// creator, the webhook dispatcher and queue, the HTTP mux, metrics and
// graceful shutdown.
package app

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// Config is the server configuration: an optional YAML file
// (SANDBOX_CONFIG), overridden by environment variables.
type Config struct {
	GitHub githubapp.Config `yaml:"github"`
	// AppSlug is the App's slug as `sandbox-bot setup` wrote it
	// (GITHUB_APP_SLUG): people mention @<slug>. The bot still reads its
	// identity from GitHub and warns when the two differ.
	AppSlug string `yaml:"app_slug"`

	// Listen is the webhook listener's address (/api/github/hook,
	// /healthz, /readyz).
	Listen string `yaml:"listen"`
	// Backend is nomad, docker or process (a plain child process, no
	// isolation: for trying the bot on a machine without Docker).
	Backend string `yaml:"backend"`
	// Image is the sandbox image reference.
	Image string `yaml:"image"`
	// DataDir is where the bot keeps task directories, locks, caches and,
	// without DatabaseURL, the SQLite store (receipts/receipts.db).
	DataDir string `yaml:"data_dir"`
	// PublicURL is where people reach the bot (links in comments); the
	// dashboard and check-run details link to it when set.
	PublicURL string `yaml:"public_url"`
	// PreviewDomain, when set, serves each live preview at a host of its
	// own under it (wildcard DNS and TLS by the operator), of another site
	// than PublicURL; unset, previews are paths of the bot's origin.
	PreviewDomain string `yaml:"preview_domain"`
	// DatabaseURL is the PostgreSQL database the replicas share for
	// receipts and transcripts (postgres://…); empty keeps them in SQLite
	// under DataDir, for one machine.
	DatabaseURL string `yaml:"database_url"`
	// TranscriptRetention is how long runs' transcripts are kept: "90d",
	// "720h", or "off" to keep none (receipts are always kept). Retention
	// is the value resolved from it.
	TranscriptRetention string        `yaml:"transcript_retention"`
	Retention           time.Duration `yaml:"-"`

	Nomad NomadConfig `yaml:"nomad"`
	Ops   OpsConfig   `yaml:",inline"`
	// Artifacts caps the task artifacts the bot stores on GitHub.
	Artifacts ArtifactsConfig `yaml:"artifacts"`
	// SetupCache bounds the per-repository setup cache.
	SetupCache SetupCacheConfig `yaml:"setup_cache"`
	// Images bounds the pictures a run is given and names the hosts they
	// are fetched from (images.go).
	Images ImagesConfig `yaml:"images"`
	// Budgets are the monthly budgets per installation and repository
	// (budgets.go).
	Budgets BudgetsConfig `yaml:"budgets"`
	// CILogTail is what a CI fix run is given of each failing Actions
	// job's log, at most ("8KiB"; SANDBOX_CI_LOG_TAIL).
	CILogTail string `yaml:"ci_log_tail"`

	// Settings are what the handlers act on, read as they are from the
	// file's top-level keys (trigger_label; allow_users, allow_teams
	// "org/team" and allow_bots, who may drive the bot without write
	// permission; max_continues, max_plan_rounds, caps, isolation,
	// progress_interval, token_refresh, dispatch_deadline,
	// review_batch_window, result_retry, preview_duration; defaults, which
	// sit beneath every repository's .sandbox.yml, and limits, which bound
	// what a repository may ask for). LoadConfig fills in their defaults
	// and the fields worked out from other settings (settle), so the
	// server hands them to the handlers as they are.
	handlers.Settings `yaml:",inline"`

	// Workers handle webhook deliveries from a queue of QueueSize; a full
	// queue answers 503 and is counted.
	Workers   int `yaml:"workers"`
	QueueSize int `yaml:"queue_size"`
	// ShutdownTimeout bounds draining the queue on SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// DenyNetworks are networks ("10.0.0.0/8", "10.1.2.3:5432") no
	// sandbox may reach, on top of link-local, the bot's listener and the
	// Nomad API, which are always denied.
	DenyNetworks []string `yaml:"deny_networks"`
	// HostAllow lists the host ports sandboxes may reach through the host
	// wall, comma-separated: "10.0.0.1:3000", "[fd00::1]:3000",
	// "host.docker.internal:8443", on Nomad "${attr.unique.network.ip-address}:3000".
	// Every sandbox is denied the machine it runs on (the bridge gateway,
	// host.docker.internal, the host's other addresses; a Nomad node's own
	// address) but these.
	HostAllow []string `yaml:"host_allow"`
	// CacheScope is who shares the docker backend's image cache:
	// repository (default) or installation. Package caches are always per
	// repository.
	CacheScope string `yaml:"cache_scope"`

	// PassEnv names environment variables of the bot that every sandbox
	// gets (the model provider's API key, a proxy): the values are treated
	// as secrets, redacted from everything the runner writes.
	PassEnv []string `yaml:"pass_env"`
	// Providers are model providers the sandboxes' model gateway serves
	// besides the built-in ones whose key is named in PassEnv; one with a
	// built-in's name (anthropic, openai, ...) overrides its base URL.
	// Their keys are read from the bot's environment and reach only the
	// gateway, never the agent (env: SANDBOX_PROVIDERS, space-separated
	// NAME=BASE_URL[,KEY_ENV[,API]]).
	Providers []dispatch.ModelProvider `yaml:"providers"`
	// OpenCodeConfig is the operator's opencode.json (env: OPENCODE_CONFIG,
	// as for OpenCode itself): the providers and models OpenCode in every
	// sandbox knows besides the repository's own opencode.json; a provider
	// that the gateway serves is re-addressed to it. Task runs, which have
	// no repository, need it for any provider OpenCode does not know.
	OpenCodeConfig string `yaml:"opencode_config"`

	// TemplatesDir holds template overrides (prompts/*.tmpl,
	// github/*.tmpl); a broken one stops the bot at start.
	TemplatesDir string `yaml:"templates_dir"`
	// RunnerBinary is the sandbox-runner executable for the process backend.
	RunnerBinary string `yaml:"runner_binary"`
	// OSVDir is an offline OSV advisory database (SANDBOX_OSV_DIR): a
	// directory of OSV JSON files or OSV's per-ecosystem all.zip exports,
	// given read-only to coding sandboxes; empty, no advisory lookups.
	OSVDir string `yaml:"osv_dir"`
	// NomadOSVVolume is the Nomad host volume holding that database on
	// each sandbox node (SANDBOX_NOMAD_OSV_VOLUME).
	NomadOSVVolume string `yaml:"nomad_osv_volume"`
	// LogLevel is zerolog's level (debug, info, warn, error).
	LogLevel string `yaml:"log_level"`
	// LogPretty writes human-readable logs instead of JSON.
	LogPretty bool `yaml:"log_pretty"`
}

// NomadConfig is where and how sandboxes run on Nomad. Address, token,
// namespace and region come from Nomad's own NOMAD_* variables.
type NomadConfig struct {
	// Addr is the Nomad API (NOMAD_ADDR); set, the backend defaults to
	// nomad.
	Addr string `yaml:"addr"`
	// Token is the bot's ACL token (NOMAD_TOKEN).
	Token string `yaml:"token"`
	// Namespace is the bot's own (NOMAD_NAMESPACE): its locks, queue and
	// kept sessions. SandboxNamespace is where sandboxes run
	// (SANDBOX_NOMAD_NAMESPACE, default "sandbox"), never the bot's: its
	// ACL policy grants alloc-exec there.
	Namespace        string `yaml:"namespace"`
	SandboxNamespace string `yaml:"sandbox_namespace"`
	// Region is the Nomad region (NOMAD_REGION).
	Region string `yaml:"region"`
	// Datacenters and NodePool are where sandbox jobs may be placed.
	Datacenters []string `yaml:"datacenters"`
	NodePool    string   `yaml:"node_pool"`
	// KillTimeout is how long Nomad waits after SIGTERM before SIGKILL:
	// the runner pushes its work and writes its receipt then (default
	// 60s, dispatch/nomad).
	KillTimeout time.Duration `yaml:"kill_timeout"`
	// Purge removes a sandbox's job from Nomad when the run is cleaned up;
	// otherwise it is stopped and left to Nomad's job GC.
	Purge bool `yaml:"purge"`
}

// Defaults of the server configuration.
const (
	DefaultListen           = ":8080"
	DefaultTriggerLabel     = "agent"
	DefaultImage            = "sandbox-bot/sandbox:local"
	DefaultWorkers          = 8
	DefaultQueueSize        = 500
	DefaultMaxContinues     = 2
	DefaultMaxPlanRounds    = 5
	DefaultProgressInterval = 10 * time.Second
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultTokenRefresh     = 45 * time.Minute
	// DefaultTranscriptRetention is as long as GitHub Actions keeps a
	// run's log.
	DefaultTranscriptRetention = "90d"
)

// Getenv is os.LookupEnv, injectable for tests.
type Getenv func(string) (string, bool)

// LoadConfig reads the file named by SANDBOX_CONFIG (if any), applies the
// environment, fills defaults and validates. Every error names the setting.
func LoadConfig(getenv Getenv) (*Config, error) {
	getenv, err := withEnvFile(getenv)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	if path, ok := getenv("SANDBOX_CONFIG"); ok && path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("SANDBOX_CONFIG: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		// io.EOF is an empty file, which is a valid (empty) configuration.
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("SANDBOX_CONFIG %s: %s", path, oneLine(strings.TrimPrefix(err.Error(), "yaml: ")))
		}
	}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	if err := c.Ops.applyEnv(getenv, &c.Settings); err != nil {
		return nil, err
	}
	if err := c.applyCapsEnv(getenv); err != nil {
		return nil, err
	}
	if err := c.SetupCache.load(getenv); err != nil {
		return nil, err
	}
	if err := c.Artifacts.load(getenv); err != nil {
		return nil, err
	}
	if err := c.Budgets.load(getenv); err != nil {
		return nil, err
	}
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.loadGitHubReads(getenv); err != nil {
		return nil, err
	}
	c.settle()
	// Only checked here (a provider whose key variable is unset fails the
	// start); the keys are read again where the backend is built, and never
	// kept in the configuration.
	if _, _, err := dispatch.ResolveProviders(c.PassEnv, c.Providers, getenv); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) applyEnv(getenv Getenv) error {
	if err := c.applyPlatformEnv(getenv); err != nil {
		return err
	}
	str := envString(getenv)
	str("SANDBOX_LISTEN", &c.Listen)
	str("SANDBOX_BACKEND", &c.Backend)
	str("SANDBOX_IMAGE", &c.Image)
	if v, ok := getenv("SANDBOX_ISOLATION"); ok {
		c.Isolation = dispatch.Isolation(v)
	}
	str("SANDBOX_DATA_DIR", &c.DataDir)
	str("SANDBOX_PUBLIC_URL", &c.PublicURL)
	str("SANDBOX_PREVIEW_DOMAIN", &c.PreviewDomain)
	str("SANDBOX_DATABASE_URL", &c.DatabaseURL)
	str("SANDBOX_TRANSCRIPT_RETENTION", &c.TranscriptRetention)
	str("SANDBOX_TRIGGER_LABEL", &c.TriggerLabel)
	str("SANDBOX_TEMPLATES_DIR", &c.TemplatesDir)
	str("SANDBOX_RUNNER_BINARY", &c.RunnerBinary)
	str("SANDBOX_OSV_DIR", &c.OSVDir)
	str("SANDBOX_NOMAD_OSV_VOLUME", &c.NomadOSVVolume)
	str("SANDBOX_NOMAD_NAMESPACE", &c.Nomad.SandboxNamespace)
	str("SANDBOX_LOG_LEVEL", &c.LogLevel)
	if v, ok := getenv("SANDBOX_LOG_PRETTY"); ok {
		c.LogPretty = v == "1" || v == "true"
	}
	for _, n := range []struct {
		key string
		dst *int
	}{{"SANDBOX_WORKERS", &c.Workers}, {"SANDBOX_QUEUE_SIZE", &c.QueueSize}, {"SANDBOX_MAX_CONTINUES", &c.MaxContinues}} {
		if v, ok := getenv(n.key); ok {
			i, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || i < 0 {
				return fmt.Errorf("%s: %q is not a non-negative whole number", n.key, v)
			}
			*n.dst = i
		}
	}
	if v, ok := getenv("SANDBOX_ALLOW_USERS"); ok {
		c.AllowUsers = splitList(v)
	}
	if v, ok := getenv("SANDBOX_PASS_ENV"); ok {
		c.PassEnv = splitList(v)
	}
	if v, ok := getenv("SANDBOX_DENY_NETWORKS"); ok {
		c.DenyNetworks = splitList(v)
	}
	if v, ok := getenv("SANDBOX_HOST_ALLOW"); ok {
		c.HostAllow = splitList(v)
	}
	str("SANDBOX_CACHE_SCOPE", &c.CacheScope)
	str("OPENCODE_CONFIG", &c.OpenCodeConfig)
	if v, ok := getenv("SANDBOX_PROVIDERS"); ok {
		c.Providers = nil
		for _, f := range strings.Fields(v) {
			p, err := dispatch.ParseProvider(f)
			if err != nil {
				return fmt.Errorf("SANDBOX_PROVIDERS: %w", err)
			}
			c.Providers = append(c.Providers, p)
		}
	}
	if v, ok := getenv("SANDBOX_ALLOW_TEAMS"); ok {
		c.AllowTeams = splitList(v)
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"SANDBOX_PROGRESS_INTERVAL", &c.ProgressInterval}, {"SANDBOX_TOKEN_REFRESH", &c.TokenRefresh}, {"SANDBOX_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout}} {
		if v, ok := getenv(d.key); ok {
			dur, err := time.ParseDuration(v)
			if err != nil || dur <= 0 {
				return fmt.Errorf("%s: %q is not a positive duration such as 10s", d.key, v)
			}
			*d.dst = dur
		}
	}
	return nil
}

// applyPlatformEnv reads go-githubapp's and Nomad's variables.
func (c *Config) applyPlatformEnv(getenv Getenv) error {
	str := envString(getenv)
	str("GITHUB_WEB_URL", &c.GitHub.WebURL)
	str("GITHUB_V3_API_URL", &c.GitHub.V3APIURL)
	str("GITHUB_V4_API_URL", &c.GitHub.V4APIURL)
	str("GITHUB_APP_WEBHOOK_SECRET", &c.GitHub.App.WebhookSecret)
	str("GITHUB_APP_PRIVATE_KEY", &c.GitHub.App.PrivateKey)
	str("GITHUB_APP_SLUG", &c.AppSlug)
	str("GITHUB_OAUTH_CLIENT_ID", &c.GitHub.OAuth.ClientID)
	str("GITHUB_OAUTH_CLIENT_SECRET", &c.GitHub.OAuth.ClientSecret)
	if v, ok := getenv("GITHUB_APP_INTEGRATION_ID"); ok {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("GITHUB_APP_INTEGRATION_ID: %q is not a number", v)
		}
		c.GitHub.App.IntegrationID = id
	}
	str("NOMAD_ADDR", &c.Nomad.Addr)
	str("NOMAD_TOKEN", &c.Nomad.Token)
	str("NOMAD_NAMESPACE", &c.Nomad.Namespace)
	str("NOMAD_REGION", &c.Nomad.Region)
	return nil
}

// envString sets a string field from a variable that is set.
func envString(getenv Getenv) func(key string, dst *string) {
	return func(key string, dst *string) {
		if v, ok := getenv(key); ok {
			*dst = v
		}
	}
}

// oneLine folds a multi-line decoder report ("unmarshal errors:\n  line
// 3: ...") into the single line a start-up failure prints.
func oneLine(msg string) string {
	var parts []string
	for _, p := range strings.Split(msg, "\n") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), ":; ", ": ")
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (c *Config) applyDefaults() {
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	if c.Backend == "" {
		c.Backend = "docker"
		if c.Nomad.Addr != "" {
			c.Backend = "nomad"
		}
	}
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.Isolation = cmp.Or(c.Isolation, dispatch.IsolationPrivileged)
	c.DataDir = cmp.Or(c.DataDir, "/var/lib/sandbox-bot")
	c.TriggerLabel = cmp.Or(c.TriggerLabel, DefaultTriggerLabel)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	c.MaxContinues = cmp.Or(c.MaxContinues, DefaultMaxContinues)
	c.MaxPlanRounds = cmp.Or(c.MaxPlanRounds, DefaultMaxPlanRounds)
	c.ProgressInterval = cmp.Or(c.ProgressInterval, DefaultProgressInterval)
	c.TokenRefresh = cmp.Or(c.TokenRefresh, DefaultTokenRefresh)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.GitHub.V3APIURL = cmp.Or(c.GitHub.V3APIURL, "https://api.github.com/")
	if !strings.HasSuffix(c.GitHub.V3APIURL, "/") {
		c.GitHub.V3APIURL += "/"
	}
	if c.GitHub.V4APIURL == "" {
		// GitHub Enterprise serves REST under /api/v3/ and GraphQL at
		// /api/graphql, not under /api/v3/.
		c.GitHub.V4APIURL = strings.TrimSuffix(strings.TrimSuffix(c.GitHub.V3APIURL, "/"), "/v3") + "/graphql"
	}
	c.GitHub.WebURL = cmp.Or(c.GitHub.WebURL, "https://github.com")
	c.LogLevel = cmp.Or(c.LogLevel, "info")
	c.TranscriptRetention = cmp.Or(c.TranscriptRetention, DefaultTranscriptRetention)
	c.Limits = c.Limits.WithDefaults()
	c.Ops.defaults(&c.Settings)
}

// validate returns the first problem as one line naming the setting.
func (c *Config) validate() error {
	switch {
	case c.GitHub.App.IntegrationID <= 0:
		return errors.New("GITHUB_APP_INTEGRATION_ID: required (the App ID from the App's settings page)")
	case c.GitHub.App.WebhookSecret == "":
		return errors.New("GITHUB_APP_WEBHOOK_SECRET: required (the webhook secret set on the App)")
	case c.GitHub.App.PrivateKey == "":
		return errors.New("GITHUB_APP_PRIVATE_KEY: required (the App's private key, PEM text)")
	case !strings.Contains(c.GitHub.App.PrivateKey, "PRIVATE KEY"):
		return errors.New("GITHUB_APP_PRIVATE_KEY: not PEM text (expected -----BEGIN RSA PRIVATE KEY-----)")
	case c.Backend != "nomad" && c.Backend != "docker" && c.Backend != "process":
		return fmt.Errorf("SANDBOX_BACKEND: %q is not nomad, docker or process", c.Backend)
	case c.Backend == "nomad" && c.Nomad.Addr == "":
		return errors.New("NOMAD_ADDR: required with SANDBOX_BACKEND=nomad")
	case !slices.Contains(dispatch.Isolations, c.Isolation):
		_, err := dispatch.ParseIsolation(string(c.Isolation))
		return fmt.Errorf("SANDBOX_ISOLATION: %w", err)
	case c.QueueSize < 1:
		return errors.New("SANDBOX_QUEUE_SIZE: must be at least 1")
	case c.Workers < 1:
		return errors.New("SANDBOX_WORKERS: must be at least 1")
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("SANDBOX_LOG_LEVEL: %w", err)
	}
	if err := c.validateStore(); err != nil {
		return err
	}
	for _, t := range c.AllowTeams {
		if !strings.Contains(t, "/") {
			return fmt.Errorf("SANDBOX_ALLOW_TEAMS: %q is not org/team", t)
		}
	}
	if err := c.validateEgress(); err != nil {
		return err
	}
	if err := checkPreviewDomain(c.PreviewDomain, c.PublicURL, c.GitHub.OAuth.ClientID != "" && c.GitHub.OAuth.ClientSecret != ""); err != nil {
		return err
	}
	if err := c.validateNomadNamespace(); err != nil {
		return err
	}
	if o := c.Limits.OutsiderReports; o != "" && o != sandboxcfg.OutsidersQuoted && o != sandboxcfg.OutsidersStrict {
		return fmt.Errorf("SANDBOX_CONFIG limits.outsider_reports: %q is not strict or quoted", o)
	}
	if err := c.Defaults.Verify(); err != nil {
		return fmt.Errorf("SANDBOX_CONFIG defaults: %w", err)
	}
	return c.validateOSV()
}

// validateOSV fails the bot's start on an OSV database the docker backend
// could not bind (or the process backend's runner could not read), which
// would otherwise fail every coding run's start. Nomad names a host
// volume instead (SANDBOX_NOMAD_OSV_VOLUME).
func (c *Config) validateOSV() error {
	if c.OSVDir == "" || c.Backend == "nomad" {
		return nil
	}
	if !filepath.IsAbs(c.OSVDir) {
		return fmt.Errorf("SANDBOX_OSV_DIR: %q is not an absolute path", c.OSVDir)
	}
	fi, err := os.Stat(c.OSVDir)
	if err != nil {
		return fmt.Errorf("SANDBOX_OSV_DIR: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("SANDBOX_OSV_DIR: %s is not a directory (of OSV JSON files or OSV's per-ecosystem all.zip exports)", c.OSVDir)
	}
	return nil
}

// ProjectSecretEnv are the pass_env names that reach a sandbox's
// environment (and resolve ${VAR}): pass_env without the provider keys,
// which only the model gateway gets.
func (c *Config) ProjectSecretEnv() []string { return dispatch.ProjectEnv(c.PassEnv, c.Providers) }
