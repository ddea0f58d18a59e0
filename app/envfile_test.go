package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
)

func mapEnv(vars map[string]string) Getenv {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// The bot starts from the env file setup writes; the environment wins over
// the file; a broken file fails the start naming the file and line only.
func TestLoadConfigFromEnvFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sandbox-bot.env")
	file := "# written by sandbox-bot setup\nGITHUB_APP_INTEGRATION_ID=4242\nGITHUB_APP_SLUG=my-bot\nGITHUB_APP_WEBHOOK_SECRET=whsec\n" +
		"GITHUB_APP_PRIVATE_KEY=" + dotenv.Quote(testKey) + "\nGITHUB_OAUTH_CLIENT_ID=Iv1.abc\nGITHUB_OAUTH_CLIENT_SECRET=oauth-secret\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(mapEnv(map[string]string{EnvFileVar: path, "GITHUB_OAUTH_CLIENT_ID": "Iv1.from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	gh := cfg.GitHub
	if gh.App.IntegrationID != 4242 || gh.App.WebhookSecret != "whsec" || gh.App.PrivateKey != testKey || cfg.AppSlug != "my-bot" ||
		gh.OAuth.ClientSecret != "oauth-secret" || gh.OAuth.ClientID != "Iv1.from-env" {
		t.Errorf("configuration from the env file: id %d, secret %q, key read back %v, slug %q, oauth %q/%q",
			gh.App.IntegrationID, gh.App.WebhookSecret, gh.App.PrivateKey == testKey, cfg.AppSlug, gh.OAuth.ClientID, gh.OAuth.ClientSecret)
	}

	bad := filepath.Join(t.TempDir(), "bad.env")
	if err := os.WriteFile(bad, []byte("GITHUB_APP_WEBHOOK_SECRET=topsecret\nnot a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{bad: "SANDBOX_BOT_ENV_FILE: " + bad + ":2: expected KEY=VALUE", "/nonexistent.env": "SANDBOX_BOT_ENV_FILE: open /nonexistent.env"} {
		_, err := LoadConfig(mapEnv(map[string]string{EnvFileVar: p}))
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("env file %s: error %v, want it to start with %q and hold no value", p, err, want)
		}
	}

	// The runners of the process backend never learn where the file is.
	if env := process.MinimalEnv([]string{EnvFileVar + "=" + path}, nil); len(env) != 0 {
		t.Errorf("a runner process would get %v", env)
	}
}
