package app_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// appKeyPEM is a real App private key, made once per test binary: the
// config check only looks at the PEM armour, but the bot will parse it.
var appKeyPEM = sync.OnceValue(func() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
})

const (
	testWebhookSecret = "whsec-do-not-print-3f9a"
	testNomadToken    = "nomad-token-do-not-print-77c1"
)

// appEnv is the least a deployment sets, plus overrides.
func appEnv(overrides map[string]string) map[string]string {
	env := map[string]string{
		"GITHUB_APP_INTEGRATION_ID": "12345",
		"GITHUB_APP_WEBHOOK_SECRET": testWebhookSecret,
		"GITHUB_APP_PRIVATE_KEY":    appKeyPEM(),
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// without is env less the named variables.
func without(env map[string]string, keys ...string) map[string]string {
	for _, k := range keys {
		delete(env, k)
	}
	return env
}

func lookup(env map[string]string) app.Getenv {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func writeServerConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sandbox-bot.yml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigFromEnvOnly(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(nil)))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"integration id", c.GitHub.App.IntegrationID, int64(12345)},
		{"webhook secret", c.GitHub.App.WebhookSecret, testWebhookSecret},
		{"private key", c.GitHub.App.PrivateKey, appKeyPEM()},
		{"v3 url", c.GitHub.V3APIURL, "https://api.github.com/"},
		{"v4 url", c.GitHub.V4APIURL, "https://api.github.com/graphql"},
		{"web url", c.GitHub.WebURL, "https://github.com"},
		{"listen", c.Listen, ":8080"},
		{"backend", c.Backend, "docker"},
		{"image", c.Image, app.DefaultImage},
		{"isolation", c.Isolation, dispatch.IsolationPrivileged},
		{"data dir", c.DataDir, "/var/lib/sandbox-bot"},
		{"trigger label", c.TriggerLabel, "agent"},
		{"workers", c.Workers, app.DefaultWorkers},
		{"queue size", c.QueueSize, app.DefaultQueueSize},
		{"max continues", c.MaxContinues, app.DefaultMaxContinues},
		{"max plan rounds", c.MaxPlanRounds, 5},
		{"progress interval", c.ProgressInterval, 10 * time.Second},
		{"token refresh", c.TokenRefresh, 45 * time.Minute},
		{"shutdown timeout", c.ShutdownTimeout, 30 * time.Second},
		{"dispatch deadline", c.DispatchDeadline, app.DefaultDispatchDeadline},
		{"log level", c.LogLevel, "info"},
		{"log pretty", c.LogPretty, false},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadConfigEveryVariable(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(map[string]string{
		"GITHUB_APP_INTEGRATION_ID": " 987 ",
		"GITHUB_V3_API_URL":         "https://ghe.example.com/api/v3",
		"GITHUB_WEB_URL":            "https://ghe.example.com",
		"NOMAD_ADDR":                "http://127.0.0.1:4646",
		"NOMAD_TOKEN":               testNomadToken,
		"NOMAD_NAMESPACE":           "agents",
		"NOMAD_REGION":              "eu",
		"SANDBOX_NOMAD_NAMESPACE":   "sandboxes",
		"SANDBOX_LISTEN":            "127.0.0.1:9000",
		"SANDBOX_IMAGE":             "registry.local/sandbox:1.2",
		"SANDBOX_ISOLATION":         "caps",
		"SANDBOX_DATA_DIR":          "/srv/bot",
		"SANDBOX_PUBLIC_URL":        "https://bot.example.com",
		"SANDBOX_TRIGGER_LABEL":     "ai",
		"SANDBOX_TEMPLATES_DIR":     "/etc/bot/templates",
		"SANDBOX_RUNNER_BINARY":     "/usr/bin/sandbox-runner",
		"SANDBOX_LOG_LEVEL":         "debug",
		"SANDBOX_LOG_PRETTY":        "true",
		"SANDBOX_WORKERS":           "3",
		"SANDBOX_QUEUE_SIZE":        "40",
		"SANDBOX_MAX_CONTINUES":     "4",
		"SANDBOX_ALLOW_USERS":       "alice, bob,,carol ",
		"SANDBOX_ALLOW_TEAMS":       "acme/platform",
		"SANDBOX_PROGRESS_INTERVAL": "2s",
		"SANDBOX_TOKEN_REFRESH":     "30m",
		"SANDBOX_SHUTDOWN_TIMEOUT":  "1m",
	})))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"integration id", c.GitHub.App.IntegrationID, int64(987)},
		{"v3 url gets its slash", c.GitHub.V3APIURL, "https://ghe.example.com/api/v3/"},
		{"v4 url of GitHub Enterprise", c.GitHub.V4APIURL, "https://ghe.example.com/api/graphql"},
		{"web url", c.GitHub.WebURL, "https://ghe.example.com"},
		{"backend follows NOMAD_ADDR", c.Backend, "nomad"},
		{"nomad addr", c.Nomad.Addr, "http://127.0.0.1:4646"},
		{"nomad token", c.Nomad.Token, testNomadToken},
		{"nomad namespace", c.Nomad.Namespace, "agents"},
		{"sandbox namespace", c.Nomad.SandboxNamespace, "sandboxes"},
		{"nomad region", c.Nomad.Region, "eu"},
		{"listen", c.Listen, "127.0.0.1:9000"},
		{"image", c.Image, "registry.local/sandbox:1.2"},
		{"isolation", c.Isolation, dispatch.IsolationCaps},
		{"data dir", c.DataDir, "/srv/bot"},
		{"public url", c.PublicURL, "https://bot.example.com"},
		{"trigger label", c.TriggerLabel, "ai"},
		{"templates dir", c.TemplatesDir, "/etc/bot/templates"},
		{"runner binary", c.RunnerBinary, "/usr/bin/sandbox-runner"},
		{"log level", c.LogLevel, "debug"},
		{"log pretty", c.LogPretty, true},
		{"workers", c.Workers, 3},
		{"queue size", c.QueueSize, 40},
		{"max continues", c.MaxContinues, 4},
		{"allow users", c.AllowUsers, []string{"alice", "bob", "carol"}},
		{"allow teams", c.AllowTeams, []string{"acme/platform"}},
		{"progress interval", c.ProgressInterval, 2 * time.Second},
		{"token refresh", c.TokenRefresh, 30 * time.Minute},
		{"shutdown timeout", c.ShutdownTimeout, time.Minute},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadConfigBackendDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		want string
	}{
		{"docker without NOMAD_ADDR", nil, "", "docker"},
		{"nomad with NOMAD_ADDR", map[string]string{"NOMAD_ADDR": "http://127.0.0.1:4646"}, "", "nomad"},
		{"nomad with nomad.addr in the file", nil, "nomad:\n  addr: http://127.0.0.1:4646\n", "nomad"},
		{"explicit docker beside NOMAD_ADDR", map[string]string{"NOMAD_ADDR": "http://127.0.0.1:4646", "SANDBOX_BACKEND": "docker"}, "", "docker"},
		{"explicit process", map[string]string{"SANDBOX_BACKEND": "process"}, "", "process"},
		{"file backend", nil, "backend: process\n", "process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := appEnv(tc.env)
			if tc.file != "" {
				env["SANDBOX_CONFIG"] = writeServerConfig(t, tc.file)
			}
			c, err := app.LoadConfig(lookup(env))
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if c.Backend != tc.want {
				t.Errorf("backend = %q, want %q", c.Backend, tc.want)
			}
		})
	}
}

const serverConfigFile = `github:
  v3_api_url: https://ghe.example.com/api/v3/
  app:
    integration_id: 42
    webhook_secret: from-file
listen: ":9090"
backend: nomad
image: registry.local/sandbox:file
isolation: caps
data_dir: /srv/file
trigger_label: robot
allow_users: [alice]
allow_bots: ["renovate[bot]"]
workers: 2
queue_size: 10
max_plan_rounds: 3
progress_interval: 5s
shutdown_timeout: 2m
nomad:
  addr: http://127.0.0.1:4646
  datacenters: [dc1, dc2]
  node_pool: sandboxes
  kill_timeout: 45s
  purge: true
defaults:
  model: anthropic/claude-sonnet-4-5
  max_budget_usd: 3
  lifecycle:
    setup: make deps
  validate:
    lint: make lint
    test:
      command: make test
      timeout_seconds: 300
limits:
  max_budget_usd: 10
  max_timeout_minutes: 120
  allowed_harnesses: [opencode]
  allowed_images: ["postgres:*"]
  allowed_models: ["anthropic/*"]
  allowed_overrides: [env, validate]
  max_cpu: 4000
  max_memory_mb: 8192
  allow_supabase: false
`

func TestLoadConfigFileWithEnvOverrides(t *testing.T) {
	t.Parallel()
	path := writeServerConfig(t, serverConfigFile)
	env := without(appEnv(map[string]string{
		"SANDBOX_CONFIG":    path,
		"SANDBOX_WORKERS":   "6",
		"SANDBOX_LISTEN":    ":7070",
		"SANDBOX_ISOLATION": "privileged",
	}), "GITHUB_APP_INTEGRATION_ID")
	c, err := app.LoadConfig(lookup(env))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	no := false
	checks := []struct {
		name      string
		got, want any
	}{
		{"integration id from the file", c.GitHub.App.IntegrationID, int64(42)},
		{"webhook secret: env over file", c.GitHub.App.WebhookSecret, testWebhookSecret},
		{"v3 url from the file", c.GitHub.V3APIURL, "https://ghe.example.com/api/v3/"},
		{"listen: env over file", c.Listen, ":7070"},
		{"workers: env over file", c.Workers, 6},
		{"isolation: env over file", c.Isolation, dispatch.IsolationPrivileged},
		{"backend from the file", c.Backend, "nomad"},
		{"image from the file", c.Image, "registry.local/sandbox:file"},
		{"data dir from the file", c.DataDir, "/srv/file"},
		{"trigger label from the file", c.TriggerLabel, "robot"},
		{"allow users from the file", c.AllowUsers, []string{"alice"}},
		{"allow bots from the file", c.AllowBots, []string{"renovate[bot]"}},
		{"queue size from the file", c.QueueSize, 10},
		{"max plan rounds from the file", c.MaxPlanRounds, 3},
		{"progress interval from the file", c.ProgressInterval, 5 * time.Second},
		{"shutdown timeout from the file", c.ShutdownTimeout, 2 * time.Minute},
		{"max continues defaulted", c.MaxContinues, app.DefaultMaxContinues},
		{"nomad", c.Nomad, app.NomadConfig{Addr: "http://127.0.0.1:4646", Datacenters: []string{"dc1", "dc2"}, NodePool: "sandboxes", KillTimeout: 45 * time.Second, Purge: true}},
		{"defaults", c.Defaults, sandboxcfg.Config{
			Model:        "anthropic/claude-sonnet-4-5",
			MaxBudgetUSD: 3,
			Lifecycle:    sandboxcfg.Lifecycle{Setup: []string{"make deps"}},
			Validate: sandboxcfg.Checks{
				{Name: "lint", Command: "make lint"},
				{Name: "test", Command: "make test", TimeoutSeconds: 300},
			},
		}},
		{"limits", c.Limits, sandboxcfg.Limits{
			MaxBudgetUSD: 10, MaxTimeoutMinutes: 120,
			AllowedHarnesses: []string{"opencode"}, AllowedImages: []string{"postgres:*"},
			AllowedModels: []string{"anthropic/*"}, AllowedOverrides: []string{"env", "validate"},
			MaxCPU: 4000, MaxMemoryMB: 8192, PidsLimit: sandboxcfg.CeilingPids, AllowSupabase: &no, MaxCIFixAttempts: sandboxcfg.CeilingCIFixAttempts, MaxAttempts: sandboxcfg.CeilingAttempts,
		}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadConfigEmptyFile(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": writeServerConfig(t, "")})))
	if err != nil {
		t.Fatalf("LoadConfig with an empty file: %v", err)
	}
	if c.Listen != ":8080" || c.Backend != "docker" {
		t.Errorf("defaults not applied: listen %q backend %q", c.Listen, c.Backend)
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file string
		want []string // substrings of the one-line error, besides the path
	}{
		{"unknown top-level key", "listen: \":9090\"\nworkerz: 3\n", []string{"line 2", "workerz"}},
		{"unknown nested key", "nomad:\n  addr: http://x\n  datacenter: dc1\n", []string{"line 3", "datacenter"}},
		{"unknown key in limits", "limits:\n  max_budget: 3\n", []string{"line 2", "max_budget"}},
		{"unknown key in defaults", "defaults:\n  harness: opencode\n  modle: x\n", []string{"line 3:3", "modle: unknown field", `did you mean "mode"`}},
		{"invalid check in defaults", "defaults:\n  validate:\n    lint:\n", []string{"line 3:10", "validate.lint: command is empty"}},
		{"invalid value in defaults", "defaults:\n  harness: codex\n", []string{"line 2:12", `harness: must be one of opencode, claude-code, command, got "codex"`}},
		{"two errors in defaults", "defaults:\n  mode: x\n  repair:\n    attempts: 9\n", []string{"line 2:9: mode: must be coding or task", "; line 4:15: repair.attempts: must be between 0 and 5"}},
		{"wrong type", "workers: many\n", []string{"line 1", "many"}},
		{"wrong duration", "progress_interval: soon\n", []string{"line 1", "soon"}},
		{"bad YAML", "listen: [\n", []string{"did not find expected node content"}},
		{"wrong type in defaults", "defaults:\n  max_budget_usd: lots\n", []string{"line 2:19: max_budget_usd: expected a number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeServerConfig(t, tc.file)
			_, err := app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": path})))
			if err == nil {
				t.Fatalf("LoadConfig accepted:\n%s", tc.file)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "SANDBOX_CONFIG "+path+": ") {
				t.Errorf("error does not start with the variable and the file: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.yml")
	_, err := app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": path})))
	if err == nil || !strings.HasPrefix(err.Error(), "SANDBOX_CONFIG: ") || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadConfig with a missing file = %v, want an error naming SANDBOX_CONFIG and %s", err, path)
	}
}

func TestLoadConfigValidationNamesTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		want string // the whole one-line error
	}{
		{"integration id missing", without(appEnv(nil), "GITHUB_APP_INTEGRATION_ID"), "",
			"GITHUB_APP_INTEGRATION_ID: required (the App ID from the App's settings page)"},
		{"integration id not a number", appEnv(map[string]string{"GITHUB_APP_INTEGRATION_ID": "my-app"}), "",
			`GITHUB_APP_INTEGRATION_ID: "my-app" is not a number`},
		{"integration id zero", appEnv(map[string]string{"GITHUB_APP_INTEGRATION_ID": "0"}), "",
			"GITHUB_APP_INTEGRATION_ID: required (the App ID from the App's settings page)"},
		{"integration id negative", appEnv(map[string]string{"GITHUB_APP_INTEGRATION_ID": "-4"}), "",
			"GITHUB_APP_INTEGRATION_ID: required (the App ID from the App's settings page)"},
		{"webhook secret missing", without(appEnv(nil), "GITHUB_APP_WEBHOOK_SECRET"), "",
			"GITHUB_APP_WEBHOOK_SECRET: required (the webhook secret set on the App)"},
		{"webhook secret empty", appEnv(map[string]string{"GITHUB_APP_WEBHOOK_SECRET": ""}), "",
			"GITHUB_APP_WEBHOOK_SECRET: required (the webhook secret set on the App)"},
		{"private key missing", without(appEnv(nil), "GITHUB_APP_PRIVATE_KEY"), "",
			"GITHUB_APP_PRIVATE_KEY: required (the App's private key, PEM text)"},
		{"private key not PEM", appEnv(map[string]string{"GITHUB_APP_PRIVATE_KEY": "/etc/bot/key.pem"}), "",
			"GITHUB_APP_PRIVATE_KEY: not PEM text (expected -----BEGIN RSA PRIVATE KEY-----)"},
		{"unknown backend", appEnv(map[string]string{"SANDBOX_BACKEND": "kubernetes"}), "",
			`SANDBOX_BACKEND: "kubernetes" is not nomad, docker or process`},
		{"nomad backend without NOMAD_ADDR", appEnv(map[string]string{"SANDBOX_BACKEND": "nomad"}), "",
			"NOMAD_ADDR: required with SANDBOX_BACKEND=nomad"},
		{"unknown isolation", appEnv(map[string]string{"SANDBOX_ISOLATION": "rootless"}), "",
			`SANDBOX_ISOLATION: "rootless" is not privileged, caps or gvisor`},
		{"workers not a number", appEnv(map[string]string{"SANDBOX_WORKERS": "eight"}), "",
			`SANDBOX_WORKERS: "eight" is not a non-negative whole number`},
		{"workers negative", appEnv(map[string]string{"SANDBOX_WORKERS": "-1"}), "",
			`SANDBOX_WORKERS: "-1" is not a non-negative whole number`},
		{"workers negative in the file", appEnv(nil), "workers: -2\n",
			"SANDBOX_WORKERS: must be at least 1"},
		{"queue size not a number", appEnv(map[string]string{"SANDBOX_QUEUE_SIZE": "1e3"}), "",
			`SANDBOX_QUEUE_SIZE: "1e3" is not a non-negative whole number`},
		{"queue size negative in the file", appEnv(nil), "queue_size: -5\n",
			"SANDBOX_QUEUE_SIZE: must be at least 1"},
		{"max continues not a number", appEnv(map[string]string{"SANDBOX_MAX_CONTINUES": "many"}), "",
			`SANDBOX_MAX_CONTINUES: "many" is not a non-negative whole number`},
		{"progress interval without unit", appEnv(map[string]string{"SANDBOX_PROGRESS_INTERVAL": "10"}), "",
			`SANDBOX_PROGRESS_INTERVAL: "10" is not a positive duration such as 10s`},
		{"token refresh zero", appEnv(map[string]string{"SANDBOX_TOKEN_REFRESH": "0s"}), "",
			`SANDBOX_TOKEN_REFRESH: "0s" is not a positive duration such as 10s`},
		{"shutdown timeout negative", appEnv(map[string]string{"SANDBOX_SHUTDOWN_TIMEOUT": "-1s"}), "",
			`SANDBOX_SHUTDOWN_TIMEOUT: "-1s" is not a positive duration such as 10s`},
		{"log level", appEnv(map[string]string{"SANDBOX_LOG_LEVEL": "loud"}), "",
			`SANDBOX_LOG_LEVEL: Unknown Level String: 'loud', defaulting to NoLevel`},
		{"team without org", appEnv(map[string]string{"SANDBOX_ALLOW_TEAMS": "acme/admins, platform"}), "",
			`SANDBOX_ALLOW_TEAMS: "platform" is not org/team`},
		{"sandbox namespace the bot's own", appEnv(map[string]string{"NOMAD_ADDR": "http://127.0.0.1:4646", "SANDBOX_NOMAD_NAMESPACE": "default"}), "",
			`SANDBOX_NOMAD_NAMESPACE: "default" is the bot's own namespace (NOMAD_NAMESPACE); sandboxes need one of their own, where the bot's alloc-exec applies and nothing else runs`},
		{"sandbox namespace the bot's named one", appEnv(map[string]string{"NOMAD_ADDR": "http://127.0.0.1:4646", "NOMAD_NAMESPACE": "sandbox"}), "",
			`SANDBOX_NOMAD_NAMESPACE: "sandbox" is the bot's own namespace (NOMAD_NAMESPACE); sandboxes need one of their own, where the bot's alloc-exec applies and nothing else runs`},
		{"sandbox namespace not a name", appEnv(map[string]string{"NOMAD_ADDR": "http://127.0.0.1:4646", "SANDBOX_NOMAD_NAMESPACE": "sand box"}), "",
			`SANDBOX_NOMAD_NAMESPACE: "sand box" is not a Nomad namespace name (letters, digits and dashes, at most 128)`},
		{"OSV database relative", appEnv(map[string]string{"SANDBOX_BACKEND": "docker", "SANDBOX_OSV_DIR": "osv"}), "",
			`SANDBOX_OSV_DIR: "osv" is not an absolute path`},
		{"OSV database missing", appEnv(map[string]string{"SANDBOX_BACKEND": "docker", "SANDBOX_OSV_DIR": "/nonexistent/osv"}), "",
			"SANDBOX_OSV_DIR: stat /nonexistent/osv: no such file or directory"},
		{"OSV database a file", appEnv(map[string]string{"SANDBOX_BACKEND": "process", "SANDBOX_OSV_DIR": "/etc/hostname"}), "",
			"SANDBOX_OSV_DIR: /etc/hostname is not a directory (of OSV JSON files or OSV's per-ecosystem all.zip exports)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			env["NOMAD_TOKEN"] = testNomadToken
			if tc.file != "" {
				env["SANDBOX_CONFIG"] = writeServerConfig(t, tc.file)
			}
			c, err := app.LoadConfig(lookup(env))
			if err == nil {
				t.Fatalf("LoadConfig accepted the settings: %+v", c)
			}
			if err.Error() != tc.want {
				t.Errorf("LoadConfig error\n got %q\nwant %q", err.Error(), tc.want)
			}
			for _, secret := range []string{testWebhookSecret, testNomadToken, appKeyPEM()} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a secret", err.Error())
				}
			}
		})
	}
}

// With no server configuration the ceilings still hold: $10 and 120
// minutes per run, 8 GiB, 4 CPUs and 4096 processes per sandbox.
func TestDefaultCeilingsWithoutConfiguration(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": githubtest.AppKey()}
	c, err := app.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := sandboxcfg.Limits{MaxBudgetUSD: 10, MaxTimeoutMinutes: 120, MaxMemoryMB: 8192, MaxCPU: 4000, PidsLimit: 4096, MaxCIFixAttempts: 3, MaxAttempts: 4}
	if !reflect.DeepEqual(c.Limits, want) {
		t.Errorf("default limits = %+v, want %+v", c.Limits, want)
	}
}
