package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"gopkg.in/yaml.v3"
)

// `sandbox-bot setup` registers the GitHub App from its manifest (app.yml)
// in one click: a local page posts the manifest to GitHub's new-App page,
// GitHub redirects back with a one-time code, and the code is traded for
// the App's credentials, which go into an env file the bot starts from
// (SANDBOX_BOT_ENV_FILE). Nothing secret is ever printed.

// manifestPlaceholder is the bot's address in app.yml; setup puts --url
// in its place.
const manifestPlaceholder = "https://BOT-HOST.example.com"

type setupOptions struct {
	Org      string
	URL      string // where GitHub reaches the bot; empty: no webhook yet
	EnvFile  string
	Force    bool
	Listen   string
	Manifest string
	WebURL   string // https://github.com, or a GitHub Enterprise Server's
	APIURL   string
}

// setupResult is what a finished registration wrote.
type setupResult struct {
	Slug       string
	InstallURL string
	// NoWebhook: the App was registered without a webhook (no --url).
	NoWebhook bool
}

func parseSetup(args []string, getenv func(string) (string, bool), stderr io.Writer) (setupOptions, error) {
	env := func(k, def string) string {
		if v, ok := getenv(k); ok && v != "" {
			return v
		}
		return def
	}
	var o setupOptions
	fs := flag.NewFlagSet("sandbox-bot setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Org, "org", "", "register the App for this organisation (default: for your user account)")
	fs.StringVar(&o.URL, "url", env("SANDBOX_PUBLIC_URL", ""), "where GitHub reaches the bot, e.g. https://bot.example.com (webhook "+"/api/github/hook)")
	fs.StringVar(&o.EnvFile, "env-file", "sandbox-bot.env", "the env file to write (mode 0600); start the bot with SANDBOX_BOT_ENV_FILE=<it>")
	fs.BoolVar(&o.Force, "force", false, "overwrite an existing env file")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:0", "address of the local setup page")
	fs.StringVar(&o.Manifest, "manifest", "app.yml", "the App manifest")
	fs.StringVar(&o.WebURL, "github-url", env("GITHUB_WEB_URL", "https://github.com"), "GitHub's web address (GITHUB_WEB_URL)")
	fs.StringVar(&o.APIURL, "api-url", env("GITHUB_V3_API_URL", "https://api.github.com/"), "GitHub's REST API address (GITHUB_V3_API_URL)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("setup: unexpected argument %q", fs.Arg(0))
	}
	o.WebURL = strings.TrimSuffix(o.WebURL, "/")
	if !strings.HasSuffix(o.APIURL, "/") {
		o.APIURL += "/"
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return o, fmt.Errorf("--url %q: not an address such as https://bot.example.com", o.URL)
		}
		o.URL = strings.TrimSuffix(o.URL, "/")
	}
	return o, nil
}

// runSetup is `sandbox-bot setup`: it serves the page, waits for GitHub's
// redirect and prints where to install the App.
func runSetup(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, err := parseSetup(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sandbox-bot setup: "+err.Error())
		return 2
	}
	s, err := newSetup(opts, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sandbox-bot setup: "+err.Error())
		return 2
	}
	page, err := s.start()
	if err != nil {
		fmt.Fprintln(stderr, "sandbox-bot setup: "+err.Error())
		return 2
	}
	fmt.Fprintf(stdout, "Open %s in a browser signed in to GitHub and click the button.\n", page)
	res, err := s.wait(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "sandbox-bot setup: "+err.Error())
		return 1
	}
	fmt.Fprintf(stdout, "Registered the App %s. Wrote %s (mode 0600): its id, slug, private key, webhook secret and OAuth client.\n", res.Slug, opts.EnvFile)
	fmt.Fprintf(stdout, "Start the bot with SANDBOX_BOT_ENV_FILE=%s; people hand it work by labelling an issue or mentioning @%s.\n", opts.EnvFile, res.Slug)
	if res.NoWebhook {
		fmt.Fprintln(stdout, "The App has no webhook yet (no --url): set its URL (…/api/github/hook) and the secret GITHUB_APP_WEBHOOK_SECRET from the env file on the App's settings page.")
	}
	fmt.Fprintf(stdout, "Install the App: %s\n", res.InstallURL)
	return 0
}

// setup is one registration: the local page and its callback.
type setup struct {
	opts     setupOptions
	manifest map[string]any
	state    string
	stderr   io.Writer
	listener net.Listener
	srv      *http.Server
	done     chan setupOutcome
}

type setupOutcome struct {
	res setupResult
	err error
}

func newSetup(opts setupOptions, stderr io.Writer) (*setup, error) {
	if _, err := os.Lstat(opts.EnvFile); err == nil && !opts.Force {
		return nil, fmt.Errorf("%s exists; pass --force to overwrite it (the App it names stays registered on GitHub)", opts.EnvFile)
	}
	b, err := os.ReadFile(opts.Manifest)
	if err != nil {
		return nil, fmt.Errorf("read the App manifest (run from the repository's checkout, or pass --manifest): %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", opts.Manifest, err)
	}
	state := make([]byte, 16)
	if _, err := rand.Read(state); err != nil {
		return nil, fmt.Errorf("make the state value: %w", err)
	}
	return &setup{opts: opts, manifest: m, state: hex.EncodeToString(state), stderr: stderr, done: make(chan setupOutcome, 1)}, nil
}

// start listens and returns the page's address.
func (s *setup) start() (string, error) {
	l, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return "", fmt.Errorf("--listen %s: %w", s.opts.Listen, err)
	}
	s.listener = l
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /callback", s.callback)
	s.srv = &http.Server{Handler: onlyHost(l.Addr().String(), mux, s.stderr), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/", nil
}

// onlyHost serves h only to requests for host, the address the page was
// printed with. A page on another site can point its own name at
// 127.0.0.1 (DNS rebinding) and read this page, whose form carries the
// state, or send a code of its own App to the callback; its requests name
// its own host, and are refused.
func onlyHost(host string, h http.Handler, stderr io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Host, host) {
			fmt.Fprintf(stderr, "sandbox-bot setup: refused a request for host %q (this page is %s)\n", r.Host, host)
			http.Error(w, fmt.Sprintf("sandbox-bot setup answers only as http://%s/ (the address it printed), not as %q", host, r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// wait blocks until the App is registered (or that failed) and stops the
// page.
func (s *setup) wait(ctx context.Context) (setupResult, error) {
	defer func() {
		// Shutdown, not Close: the callback's answer (the installation
		// link) is still being written when its outcome arrives here.
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(stop)
	}()
	select {
	case out := <-s.done:
		return out.res, out.err
	case <-ctx.Done():
		return setupResult{}, fmt.Errorf("stopped before GitHub redirected back: %w", ctx.Err())
	}
}

// manifestJSON is app.yml with the bot's address filled in and GitHub's
// redirect pointed at this page's callback.
func (s *setup) manifestJSON() ([]byte, error) {
	m, _ := fillPlaceholder(s.manifest, s.opts.URL).(map[string]any)
	m["redirect_url"] = "http://" + s.listener.Addr().String() + "/callback"
	return json.Marshal(m)
}

// fillPlaceholder replaces the placeholder address in every string of v by
// base; with no base, entries that name it are dropped (nil).
func fillPlaceholder(v any, base string) any {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, manifestPlaceholder) {
			return t
		}
		if base == "" {
			return nil
		}
		return strings.ReplaceAll(t, manifestPlaceholder, base)
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if f := fillPlaceholder(e, base); f != nil {
				out[k] = f
			}
		}
		if base == "" && t["url"] != nil && out["url"] == nil {
			return nil // hook_attributes without its url
		}
		return out
	case []any:
		var out []any
		for _, e := range t {
			if f := fillPlaceholder(e, base); f != nil {
				out = append(out, f)
			}
		}
		return out
	}
	return v
}

var setupPage = template.Must(template.New("setup").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Register sandbox-bot</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Register the GitHub App</h1>
<p>The button sends the App's manifest to GitHub, {{if .Org}}for the organisation <b>{{.Org}}</b>{{else}}for your user account{{end}}.
GitHub shows what the App may do; when you create it, GitHub sends you back here and the App's credentials go into <code>{{.EnvFile}}</code>.</p>
<p>Webhook: {{if .URL}}<code>{{.URL}}/api/github/hook</code>{{else}}none yet (no <code>--url</code>){{end}}</p>
<form action="{{.Action}}" method="post">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button id="create" type="submit">Create the GitHub App on GitHub</button>
</form>
</body></html>
`))

var setupMessage = template.Must(template.New("message").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>sandbox-bot setup</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1 id="result">{{.Title}}</h1><p>{{.Text}}</p>{{with .Link}}<p><a id="install" href="{{.}}">{{.}}</a></p>{{end}}
</body></html>
`))

func (s *setup) page(w http.ResponseWriter, _ *http.Request) {
	manifest, err := s.manifestJSON()
	if err != nil {
		http.Error(w, "the manifest cannot be sent: "+err.Error(), http.StatusInternalServerError)
		return
	}
	action := s.opts.WebURL + "/settings/apps/new"
	if s.opts.Org != "" {
		action = s.opts.WebURL + "/organizations/" + url.PathEscape(s.opts.Org) + "/settings/apps/new"
	}
	w.Header().Set("Cache-Control", "no-store")
	_ = setupPage.Execute(w, map[string]any{
		"Org": s.opts.Org, "URL": s.opts.URL, "EnvFile": s.opts.EnvFile,
		"Action": action + "?state=" + url.QueryEscape(s.state), "Manifest": string(manifest),
	})
}

func message(w http.ResponseWriter, code int, title, text, link string) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = setupMessage.Execute(w, map[string]string{"Title": title, "Text": text, "Link": link})
}

// callback receives GitHub's redirect. A redirect without this run's state
// was not started from its page (a forged link, an old tab): it is refused
// and its code is never exchanged.
func (s *setup) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(s.state)) != 1 {
		fmt.Fprintln(s.stderr, "sandbox-bot setup: refused a redirect whose state is not this setup's")
		message(w, http.StatusBadRequest, "Refused", "This redirect does not carry the state of this setup, so its code was not used. Start from the setup page.", "")
		return
	}
	code := q.Get("code")
	if code == "" {
		message(w, http.StatusBadRequest, "No code", "GitHub sent no code; start again from the setup page.", "")
		return
	}
	res, err := s.complete(r.Context(), code)
	if err != nil {
		message(w, http.StatusBadGateway, "Registration failed", err.Error(), "")
	} else {
		message(w, http.StatusOK, "The App "+res.Slug+" is registered", "Its credentials are in "+s.opts.EnvFile+". Install it on your repositories:", res.InstallURL)
	}
	select {
	case s.done <- setupOutcome{res, err}:
	default: // a second redirect after the first finished
	}
}

// complete trades the code for the App's credentials and writes them.
func (s *setup) complete(ctx context.Context, code string) (setupResult, error) {
	client := github.NewClient(nil)
	base, err := url.Parse(s.opts.APIURL)
	if err != nil {
		return setupResult{}, fmt.Errorf("--api-url %q: %w", s.opts.APIURL, err)
	}
	client.BaseURL = base
	cfg, _, err := client.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		return setupResult{}, fmt.Errorf("exchange the code with GitHub (POST /app-manifests/{code}/conversions): %w", err)
	}
	res := setupResult{Slug: cfg.GetSlug(), InstallURL: strings.TrimSuffix(cfg.GetHTMLURL(), "/") + "/installations/new"}
	if err := writeEnvFile(s.opts, cfg, &res); err != nil {
		return res, err
	}
	return res, nil
}
