package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// setupRun is `sandbox-bot setup` running in this process against the fake
// GitHub.
type setupRun struct {
	page           string
	stdout, stderr *syncBuffer
	code           chan int
}

var openRE = regexp.MustCompile(`Open (http://\S+) in a browser`)

func startSetup(t *testing.T, gh *githubtest.Server, envFile string, extra ...string) *setupRun {
	t.Helper()
	args := append([]string{"--org", "octo-org", "--url", "https://bot.example.com", "--env-file", envFile,
		"--manifest", filepath.Join(testenv.ModuleRoot(t), "app.yml"), "--github-url", gh.URL(), "--api-url", gh.URL()}, extra...)
	r := &setupRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	noEnv := func(string) (string, bool) { return "", false }
	go func() { r.code <- runSetup(ctx, args, noEnv, r.stdout, r.stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := openRE.FindStringSubmatch(r.stdout.String()); m != nil {
			r.page = m[1]
			return r
		}
		select {
		case code := <-r.code:
			t.Fatalf("setup exited with %d before serving its page:\n%s%s", code, r.stdout, r.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("setup printed no page address within 10s:\n%s%s", r.stdout, r.stderr)
	return nil
}

// exit waits for runSetup to return.
func (r *setupRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.code:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("setup did not finish:\n%s%s", r.stdout, r.stderr)
		return 0
	}
}

// checkEnvFile asserts the env file holds the conversion's every field under
// the bot's names, mode 0600, that nothing secret was printed, and that the
// bot starts from the file alone and answers /healthz.
func checkEnvFile(t *testing.T, gh *githubtest.Server, envFile string, r *setupRun) {
	t.Helper()
	apps := gh.ManifestApps()
	if len(apps) != 1 || apps[0].Conversion == nil {
		t.Fatalf("want one App registered and converted, got %+v", apps)
	}
	a := apps[0]
	if hook := a.Manifest["hook_attributes"].(map[string]any)["url"]; hook != "https://bot.example.com"+app.WebhookPath || a.Owner != "octo-org" || !a.Org {
		t.Errorf("manifest sent for %s (org %v) with webhook %v", a.Owner, a.Org, hook)
	}
	if redirect := a.Manifest["redirect_url"].(string); !strings.HasPrefix(r.page, strings.TrimSuffix(redirect, "callback")) {
		t.Errorf("redirect_url %s is not the setup page's callback (%s)", redirect, r.page)
	}
	st, err := os.Stat(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", envFile, st.Mode().Perm())
	}
	vars, err := dotenv.Read(envFile)
	if err != nil {
		t.Fatal(err)
	}
	c := a.Conversion
	want := map[string]string{
		"GITHUB_APP_INTEGRATION_ID": fmt.Sprint(c["id"]), "GITHUB_APP_SLUG": c["slug"].(string),
		"GITHUB_APP_WEBHOOK_SECRET": c["webhook_secret"].(string), "GITHUB_APP_PRIVATE_KEY": c["pem"].(string),
		"GITHUB_OAUTH_CLIENT_ID": c["client_id"].(string), "GITHUB_OAUTH_CLIENT_SECRET": c["client_secret"].(string),
		"GITHUB_V3_API_URL": gh.URL(), "SANDBOX_PUBLIC_URL": "https://bot.example.com",
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s in the env file is %q, want %q", k, vars[k], v)
		}
	}
	printed := r.stdout.String() + r.stderr.String()
	for _, secret := range []string{c["webhook_secret"].(string), c["client_secret"].(string), "PRIVATE KEY"} {
		if strings.Contains(printed, secret) {
			t.Errorf("setup printed a secret (%.12s…):\n%s", secret, printed)
		}
	}
	if install := c["html_url"].(string) + "/installations/new"; !strings.Contains(r.stdout.String(), "Install the App: "+install) {
		t.Errorf("setup must end with the installation URL %s:\n%s", install, r.stdout)
	}

	cfg, err := app.LoadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{app.EnvFileVar: envFile, "SANDBOX_BACKEND": "process", "SANDBOX_DATA_DIR": t.TempDir()}[k]
		return v, ok
	})
	if err != nil {
		t.Fatalf("the bot does not start from the env file: %v", err)
	}
	srv, err := app.NewServer(cfg, backendtest.NewMemory(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("/healthz of the bot started from the env file: %d %s", resp.StatusCode, body)
	}
}

// The whole registration in headless Chromium: the local page, its button,
// the fake GitHub's new-App page, the redirect back with code and state.
// A redirect with another state is refused first and changes nothing.
func TestSetupRegistersTheAppFromTheBrowser(t *testing.T) {
	t.Parallel()
	bin := testenv.Chromium(t)
	gh := githubtest.New(t, githubtest.Options{})
	envFile := filepath.Join(t.TempDir(), "sandbox-bot.env")
	r := startSetup(t, gh, envFile)

	alloc, cancel := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-component-update", true))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()

	forged := r.page + "callback?" + url.Values{"code": {"stolen"}, "state": {"not-this-setup"}}.Encode()
	if err := chromedp.Do(ctx, chromedp.Navigate(forged)); err != nil {
		t.Fatal(err)
	}
	refused, err := chromedp.Run(ctx, chromedp.Text("#result"))
	if err != nil {
		t.Fatal(err)
	}
	if refused != "Refused" || len(gh.ManifestApps()) != 0 {
		t.Fatalf("a redirect with a wrong state: page %q, Apps registered %d", refused, len(gh.ManifestApps()))
	}
	if _, err := os.Stat(envFile); err == nil {
		t.Fatal("a redirect with a wrong state wrote the env file")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(r.page), chromedp.Click("#create"), chromedp.WaitVisible("#install")); err != nil {
		t.Fatalf("drive the setup page: %v\n%s%s", err, r.stdout, r.stderr)
	}
	registered, err := chromedp.Run(ctx, chromedp.Text("#result"))
	if err != nil {
		t.Fatal(err)
	}
	install, err := chromedp.Run(ctx, chromedp.AttributeValue("#install", "href"))
	if err != nil {
		t.Fatal(err)
	}
	if code := r.exit(t); code != 0 {
		t.Fatalf("setup exited with %d:\n%s%s", code, r.stdout, r.stderr)
	}
	if !strings.Contains(registered, "is registered") || !strings.HasSuffix(install.Value, "/installations/new") {
		t.Errorf("result page %q links %q", registered, install.Value)
	}
	if !strings.Contains(r.stderr.String(), "refused a redirect") {
		t.Errorf("the refused redirect is not on stderr:\n%s", r.stderr)
	}
	checkEnvFile(t, gh, envFile, r)
}

var (
	formActionRE = regexp.MustCompile(`<form action="([^"]+)"`)
	manifestRE   = regexp.MustCompile(`name="manifest" value="([^"]*)"`)
)

// An existing env file is kept unless --force; a redirect without this
// setup's state is refused, and so is any request for another host (DNS
// rebinding); with --force the file is replaced, still 0600.
// The browser's part is played by net/http here (the Chromium test drives
// the page itself).
func TestSetupKeepsFilesAndRefusesWrongStateAndHost(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{})
	envFile := filepath.Join(t.TempDir(), "sandbox-bot.env")
	if err := os.WriteFile(envFile, []byte("OLD=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	args := []string{"--env-file", envFile, "--manifest", filepath.Join(testenv.ModuleRoot(t), "app.yml")}
	if code := runSetup(t.Context(), args, func(string) (string, bool) { return "", false }, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), envFile+" exists; pass --force") {
		t.Fatalf("setup over an existing file: exit %d, stderr %q", code, stderr.String())
	}

	r := startSetup(t, gh, envFile, "--force")
	resp, err := http.Get(r.page + "callback?" + url.Values{"code": {"stolen"}, "state": {"guess"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b, _ := os.ReadFile(envFile); resp.StatusCode != http.StatusBadRequest || string(b) != "OLD=1\n" || len(gh.ManifestApps()) != 0 {
		t.Fatalf("a wrong state: status %d, env file %q, Apps %d", resp.StatusCode, b, len(gh.ManifestApps()))
	}

	// A page of another site whose name it pointed at 127.0.0.1 (DNS
	// rebinding): its requests carry its own Host, and get nothing.
	u, _ := url.Parse(r.page)
	foreign := "rebind.example:" + u.Port()
	for _, p := range []string{"", "callback?" + url.Values{"code": {"theirs"}, "state": {"x"}}.Encode()} {
		req, _ := http.NewRequest("GET", r.page+p, nil)
		req.Host = foreign
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(body), "state=") || strings.Contains(string(body), "manifest") ||
			!strings.Contains(string(body), "answers only as "+r.page) {
			t.Errorf("GET /%s as %s: %d %s", p, foreign, resp.StatusCode, body)
		}
	}
	if len(gh.ManifestApps()) != 0 {
		t.Fatalf("a request for a foreign host made an App")
	}

	resp, err = http.Get(r.page)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	action, manifest := formActionRE.FindSubmatch(page), manifestRE.FindSubmatch(page)
	if action == nil || manifest == nil {
		t.Fatalf("the setup page has no manifest form:\n%s", page)
	}
	target := html.UnescapeString(string(action[1]))
	if !strings.HasPrefix(target, strings.TrimSuffix(gh.URL(), "/")+"/organizations/octo-org/settings/apps/new?state=") {
		t.Errorf("the form posts to %s, want the organisation's new-App page", target)
	}
	resp, err = http.PostForm(target, url.Values{"manifest": {html.UnescapeString(string(manifest[1]))}})
	if err != nil {
		t.Fatalf("%v (page %s)\n%s%s", err, r.page, r.stdout, r.stderr)
	}
	done, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(done), "is registered") {
		t.Fatalf("after GitHub's redirect: %d\n%s", resp.StatusCode, done)
	}
	if code := r.exit(t); code != 0 {
		t.Fatalf("setup exited with %d:\n%s%s", code, r.stdout, r.stderr)
	}
	checkEnvFile(t, gh, envFile, r)
}

// Without --url the App is registered without a webhook: every entry that
// names the placeholder address goes, the rest of the manifest stays.
func TestManifestWithoutURLHasNoWebhook(t *testing.T) {
	t.Parallel()
	var errs syncBuffer
	s, err := newSetup(setupOptions{EnvFile: filepath.Join(t.TempDir(), "x.env"), Manifest: filepath.Join(testenv.ModuleRoot(t), "app.yml")}, &errs)
	if err != nil {
		t.Fatal(err)
	}
	m := fillPlaceholder(s.manifest, "").(map[string]any)
	if _, ok := m["hook_attributes"]; ok || m["redirect_url"] != nil || m["name"] != "sandbox-bot" || m["default_events"] == nil {
		t.Errorf("manifest without --url: %v", m)
	}
	filled := fillPlaceholder(s.manifest, "https://bot.example.com").(map[string]any)
	if hook := filled["hook_attributes"].(map[string]any); hook["url"] != "https://bot.example.com/api/github/hook" || hook["active"] != true {
		t.Errorf("manifest with --url: hook %v", hook)
	}
}
