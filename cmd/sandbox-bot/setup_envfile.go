package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// writeEnvFile writes the App's credentials under the names the bot reads
// (app.LoadConfig), mode 0600. Without --force an existing file is never
// replaced (O_EXCL, so a file that appeared meanwhile is not either); with
// it the new file replaces the old by rename, never half-written.
func writeEnvFile(opts setupOptions, cfg *github.AppConfig, res *setupResult) error {
	secret := cfg.GetWebhookSecret()
	if secret == "" {
		// GitHub makes no secret for an App without a webhook; the bot
		// needs one, and the operator sets it when adding the webhook.
		b := make([]byte, 20)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("make a webhook secret: %w", err)
		}
		secret, res.NoWebhook = hex.EncodeToString(b), true
	}
	vars := [][2]string{
		{"GITHUB_APP_INTEGRATION_ID", strconv.FormatInt(cfg.GetID(), 10)},
		{"GITHUB_APP_SLUG", cfg.GetSlug()},
		{"GITHUB_APP_WEBHOOK_SECRET", secret},
		{"GITHUB_APP_PRIVATE_KEY", cfg.GetPEM()},
		{"GITHUB_OAUTH_CLIENT_ID", cfg.GetClientID()},
		{"GITHUB_OAUTH_CLIENT_SECRET", cfg.GetClientSecret()},
	}
	if opts.WebURL != "https://github.com" {
		vars = append(vars, [2]string{"GITHUB_WEB_URL", opts.WebURL})
	}
	if opts.APIURL != "https://api.github.com/" {
		vars = append(vars, [2]string{"GITHUB_V3_API_URL", opts.APIURL})
	}
	if opts.URL != "" {
		vars = append(vars, [2]string{"SANDBOX_PUBLIC_URL", opts.URL})
	}
	for _, v := range vars {
		if v[1] == "" {
			return fmt.Errorf("GitHub's answer has no value for %s; nothing was written", v[0])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# sandbox-bot: the GitHub App %s (%s), registered by `sandbox-bot setup` on %s.\n", cfg.GetSlug(), cfg.GetHTMLURL(), time.Now().UTC().Format(time.DateOnly))
	fmt.Fprintf(&b, "# Start the bot with %s=<this file>. It holds the App's private key: keep it secret.\n", app.EnvFileVar)
	for _, v := range vars {
		b.WriteString(v[0] + "=" + dotenv.Quote(v[1]) + "\n")
	}
	if opts.Force {
		return replaceFile(opts.EnvFile, []byte(b.String()))
	}
	f, err := os.OpenFile(opts.EnvFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while the App was registered; not overwriting it without --force (the App is registered: delete it on GitHub or run setup again with --force)", opts.EnvFile)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", opts.EnvFile, err)
	}
	return closeAfter(f, opts.EnvFile, []byte(b.String()))
}

func replaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := closeAfter(f, path, data); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// closeAfter makes f 0600 (whatever the umask), writes data and closes it.
func closeAfter(f *os.File, path string, data []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
