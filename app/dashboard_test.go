package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

const (
	oauthClientID     = "Iv1.dashboardtest"
	oauthClientSecret = "dashboard-oauth-secret"
)

// dashFixture is the bot with OAuth sign-in on a fake GitHub, its
// receipts store seeded: alice reads octo/alpha and other/gamma, bob reads
// octo/beta only.
type dashFixture struct {
	t    testing.TB
	gh   *githubtest.Server
	data string
	srv  atomic.Pointer[Server]
	http *httptest.Server
	// seeded are the receipts, by repository.
	seeded map[string][]receipts.Run
	// ids are the fake's repository ids, by name.
	ids map[string]int64
	// backend, when set before a start, is the bot's backend (the
	// in-memory one otherwise).
	backend dispatch.Backend
	// env, when set before a start, is added to the bot's settings.
	env map[string]string
	// dbURL, when set, is the PostgreSQL database the bot keeps its
	// receipts in (SQLite under data otherwise).
	dbURL string
}

// hostileTitle is an issue title that would be markup if it were not
// escaped.
const hostileTitle = `Fix <img src=x onerror="document.title='pwned'"> <b>login</b>`

var dashDay = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func newDashFixture(t testing.TB) *dashFixture {
	t.Helper()
	return newDashFixtureOn(t, "")
}

// newDashFixtureOn is newDashFixture with its receipts in the PostgreSQL
// database at dbURL ("": SQLite).
func newDashFixtureOn(t testing.TB, dbURL string) *dashFixture {
	t.Helper()
	f := &dashFixture{t: t, gh: githubtest.New(t, githubtest.Options{}), data: t.TempDir(), seeded: map[string][]receipts.Run{}, dbURL: dbURL}
	f.ids = map[string]int64{}
	for name, inst := range map[string]int64{"octo/alpha": 1, "octo/beta": 1, "other/gamma": 2} {
		f.ids[name] = f.gh.AddRepo(name, inst, nil).ID
	}
	f.gh.SetPermission("octo/alpha", "alice", "read")
	f.gh.SetPermission("other/gamma", "alice", "write")
	f.gh.SetPermission("octo/beta", "bob", "admin")
	f.gh.SetOAuthApp(oauthClientID, oauthClientSecret)

	run := func(id, repo, mode, status string, n int, cost, secs float64, day int) receipts.Run {
		return receipts.Run{TaskID: id, Repo: repo, RepoID: f.ids[repo], InstallationID: 1, Number: n, Issue: n, Mode: mode, Status: status, Attempt: 1,
			URL: fmt.Sprintf("%s%s/issues/%d", f.gh.URL(), repo, n), CostUSD: cost, DurationSeconds: secs, Steps: 7,
			EndedAt: dashDay.Add(time.Duration(day) * 24 * time.Hour)}
	}
	all := []receipts.Run{
		run("T-A0000001", "octo/alpha", "plan", "completed", 1, 0.40, 60, 0),
		run("T-A0000002", "octo/alpha", "execute", "completed", 1, 1.60, 300, 1),
		run("T-A0000003", "octo/alpha", "execute", "failed", 2, 0.50, 120, 3),
		run("T-B0000001", "octo/beta", "execute", "timeout", 5, 9.99, 3600, 1),
		run("T-B0000002", "octo/beta", "revise", "completed", 6, 0.10, 30, 2),
		run("T-C0000001", "other/gamma", "task", "budget_exceeded", 9, 2.00, 900, 4),
	}
	all[1].Title = hostileTitle
	all[0].Title = "Add a cache to the client with a title long enough to wrap in its cell"
	all[0].Repo = "octo/alpha"
	for _, r := range all {
		f.seeded[r.Repo] = append(f.seeded[r.Repo], r)
	}
	store := f.store()
	if err := store.PutMany(t.Context(), all); err != nil {
		t.Fatal(err)
	}
	store.Close()

	f.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.srv.Load().Handler().ServeHTTP(w, r) }))
	t.Cleanup(f.http.Close)
	f.start()
	return f
}

// store opens the fixture's store (the bot's, as it keeps it).
func (f *dashFixture) store() receipts.Store {
	f.t.Helper()
	s, err := receipts.Open(f.t.Context(), f.data+"/receipts", f.dbURL)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// start (re)starts the bot on the same data directory.
func (f *dashFixture) start() {
	f.t.Helper()
	if old := f.srv.Load(); old != nil {
		old.Stop()
	}
	vars := map[string]string{
		"GITHUB_V3_API_URL": f.gh.URL(), "GITHUB_WEB_URL": strings.TrimSuffix(f.gh.URL(), "/"),
		"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret, "GITHUB_APP_PRIVATE_KEY": testKey,
		"SANDBOX_BACKEND": "process", "SANDBOX_DATA_DIR": f.data, "SANDBOX_PUBLIC_URL": f.http.URL,
		"GITHUB_OAUTH_CLIENT_ID": oauthClientID, "GITHUB_OAUTH_CLIENT_SECRET": oauthClientSecret,
	}
	maps.Copy(vars, f.env)
	if f.dbURL != "" {
		vars["SANDBOX_DATABASE_URL"] = f.dbURL
	}
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		f.t.Fatal(err)
	}
	var backend dispatch.Backend = backendtest.NewMemory()
	if f.backend != nil {
		backend = f.backend
	}
	srv, err := NewServer(cfg, backend, zerolog.Nop())
	if err != nil {
		f.t.Fatal(err)
	}
	f.srv.Store(srv)
	f.t.Cleanup(srv.Stop)
}

// runsOf is the seeded receipts of repos.
func (f *dashFixture) runsOf(repos ...string) []receipts.Run {
	var out []receipts.Run
	for _, r := range repos {
		out = append(out, f.seeded[r]...)
	}
	return out
}

// signedInClient signs login in through the OAuth flow, as a browser
// would: redirects followed, cookies kept.
func (f *dashFixture) signedInClient(login string) *http.Client {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	f.gh.SignInAs(login)
	resp, err := c.Get(f.http.URL + "/dashboard")
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/dashboard" {
		f.t.Fatalf("sign-in of %s ended at %s with %d, want /dashboard with 200", login, resp.Request.URL, resp.StatusCode)
	}
	return c
}

type apiRuns struct {
	Viewer string         `json:"viewer"`
	Page   receipts.Page  `json:"page"`
	Stats  receipts.Stats `json:"stats"`
	Repos  []string       `json:"repositories"`
}

func (f *dashFixture) api(c *http.Client, query string) (int, apiRuns) {
	f.t.Helper()
	resp, err := c.Get(f.http.URL + "/api/runs" + query)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiRuns
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			f.t.Fatal(err)
		}
	}
	return resp.StatusCode, out
}

func taskIDs(runs []receipts.Run) map[string]bool {
	out := map[string]bool{}
	for _, r := range runs {
		out[r.TaskID] = true
	}
	return out
}

func TestDashboardRefusesTheUnauthenticated(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.http.URL + "/dashboard?repo=octo%2Falpha")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/dashboard/login?next=") {
		t.Errorf("GET /dashboard without a session: %d to %q, want a redirect to /dashboard/login", resp.StatusCode, loc)
	}
	if code, _ := f.api(noRedirect, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/runs without a session: %d, want 401", code)
	}
	// A forged session cookie is no session.
	req, _ := http.NewRequest(http.MethodGet, f.http.URL+"/api/runs", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "eyJsb2dpbiI6ImFsaWNlIn0"})
	if code := status(t, noRedirect, req); code != http.StatusUnauthorized {
		t.Errorf("GET /api/runs with a forged cookie: %d, want 401", code)
	}
	// The login step sets a state cookie and sends the browser to GitHub.
	resp, err = noRedirect.Get(f.http.URL + "/dashboard/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var state *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == stateCookie {
			state = c
		}
	}
	if resp.StatusCode != http.StatusFound || !strings.Contains(resp.Header.Get("Location"), "/login/oauth/authorize?") || state == nil ||
		!state.HttpOnly || state.SameSite != http.SameSiteLaxMode {
		t.Fatalf("login: %d to %q, state cookie %+v; want a redirect to GitHub's authorize with an HttpOnly SameSite=Lax state cookie",
			resp.StatusCode, resp.Header.Get("Location"), state)
	}
	// A callback whose state is not the browser's is refused.
	req, _ = http.NewRequest(http.MethodGet, f.http.URL+"/dashboard/callback?code=x&state=forged", nil)
	req.AddCookie(state)
	if code := status(t, noRedirect, req); code != http.StatusBadRequest {
		t.Errorf("callback with another state: %d, want 400", code)
	}
	if f.gh.UserTokens() != 0 {
		t.Errorf("%d user tokens issued: a refused callback must not exchange its code", f.gh.UserTokens())
	}
}

// status sends req and returns its status code, closing the body.
func status(t *testing.T, c *http.Client, req *http.Request) int {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAPIRunsShowsOnlyReadableRepositories(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	for _, c := range []struct {
		login string
		repos []string
	}{{"alice", []string{"octo/alpha", "other/gamma"}}, {"bob", []string{"octo/beta"}}, {"eve", nil}} {
		client := f.signedInClient(c.login)
		code, got := f.api(client, "")
		want := f.runsOf(c.repos...)
		if code != http.StatusOK || got.Viewer != c.login || got.Page.Total != len(want) || got.Stats.Runs != len(want) {
			t.Errorf("%s: %d, viewer %q, %d runs (stats %d); want 200, %d runs of %v", c.login, code, got.Viewer, got.Page.Total, got.Stats.Runs, len(want), c.repos)
		}
		wantIDs := taskIDs(want)
		for _, r := range append(got.Page.Runs, got.Stats.Expensive...) {
			if !wantIDs[r.TaskID] {
				t.Errorf("%s sees %s of %s, which they cannot read", c.login, r.TaskID, r.Repo)
			}
		}
		// Asking for a repository one cannot read shows nothing of it.
		if code, got := f.api(client, "?repo=octo%2Fbeta"); c.login != "bob" && (code != http.StatusOK || got.Page.Total != 0 || got.Stats.Runs != 0) {
			t.Errorf("%s asking for octo/beta: %d, %d runs; want none", c.login, code, got.Page.Total)
		}
	}
	// Filters: alice's failed execute runs in alpha.
	client := f.signedInClient("alice")
	_, got := f.api(client, "?repo=octo%2Falpha&mode=execute&status=failed")
	if got.Page.Total != 1 || got.Page.Runs[0].TaskID != "T-A0000003" {
		t.Errorf("filtered: %+v, want only T-A0000003", got.Page.Runs)
	}
	_, got = f.api(client, "?from=2026-05-05&to=2026-05-07")
	if ids := taskIDs(got.Page.Runs); got.Page.Total != 2 || !ids["T-A0000002"] || !ids["T-A0000003"] {
		t.Errorf("5-7 May: %+v, want T-A0000002 and T-A0000003", got.Page.Runs)
	}
	if code, _ := f.api(client, "?from=yesterday"); code != http.StatusBadRequest {
		t.Errorf("a bad date answers %d, want 400", code)
	}
}

func TestDashboardKeepsReceiptsAcrossRestart(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	client := f.signedInClient("alice")
	_, before := f.api(client, "")
	f.start()
	// The session outlives the restart (sealed with the OAuth secret).
	code, after := f.api(client, "")
	if code != http.StatusOK || after.Page.Total != before.Page.Total || after.Stats.CostUSD != before.Stats.CostUSD || before.Page.Total != 4 {
		t.Errorf("after a restart: %d, %d runs $%.2f; before %d runs $%.2f (want 4 both times)", code, after.Page.Total, after.Stats.CostUSD, before.Page.Total, before.Stats.CostUSD)
	}
}

func TestDashboardOnlyOnAdminListenerWithoutOAuth(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{})
	vars := map[string]string{
		"GITHUB_V3_API_URL": gh.URL(), "GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": testSecret,
		"GITHUB_APP_PRIVATE_KEY": testKey, "SANDBOX_BACKEND": "process", "SANDBOX_DATA_DIR": t.TempDir(),
	}
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, backendtest.NewMemory(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	for _, path := range []string{"/dashboard", "/api/runs", "/dashboard/usage", "/dashboard/usage.csv", "/dashboard/login"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("public listener without OAuth: GET %s answered %d, want 404", path, rec.Code)
		}
		if path == "/dashboard/login" {
			continue
		}
		rec = httptest.NewRecorder()
		srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("admin listener: GET %s answered %d, want 200", path, rec.Code)
		}
	}
	cfg.GitHub.OAuth.ClientID = "only-the-id"
	if _, err := NewServer(cfg, backendtest.NewMemory(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "GITHUB_OAUTH_CLIENT_SECRET") {
		t.Errorf("an OAuth client id without its secret: %v, want an error naming GITHUB_OAUTH_CLIENT_SECRET", err)
	}
}

// Access follows the repository, not its name. octo/alpha is renamed
// (same id) and a new repository takes the old name, readable by mallory
// only: mallory sees none of the old repository's receipts, alice (who
// reads the renamed one) still sees them, and a receipt the bot keeps
// under the old name after the rename is stored with the renamed
// repository's id (GitHub redirects the old name to it).
func TestDashboardFollowsTheRepositoryIDNotItsName(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	f.gh.RenameRepo("octo/alpha", "octo/renamed")
	late := receipts.Run{TaskID: "T-A0000009", Repo: "octo/alpha", InstallationID: 1, Number: 4, Issue: 4, Mode: "plan", Status: "completed", Attempt: 1, EndedAt: dashDay}
	ended := handlers.EndedRun{Meta: dispatch.Meta{TaskID: late.TaskID, Repo: late.Repo, InstallationID: 1, Number: 4, Mode: dispatch.ModePlan, Attempt: 1},
		Issue: 4, Status: "completed", EndedAt: dashDay}
	if err := f.srv.Load().Base().Receipts.Store.Keep(t.Context(), ended); err != nil {
		t.Fatal(err)
	}
	taken := f.gh.AddRepo("octo/alpha", 1, nil)
	f.gh.SetPermission("octo/alpha", "mallory", "admin")
	if taken.ID == f.ids["octo/alpha"] {
		t.Fatal("the new repository got the old one's id")
	}

	if code, got := f.api(f.signedInClient("mallory"), ""); code != http.StatusOK || got.Page.Total != 0 {
		t.Errorf("mallory, who reads the new octo/alpha: %d, %d runs %v; want none of the old octo/alpha's", code, got.Page.Total, taskIDs(got.Page.Runs))
	}
	code, got := f.api(f.signedInClient("alice"), "?repo=octo%2Falpha")
	want := taskIDs(append(f.runsOf("octo/alpha"), late))
	if code != http.StatusOK || got.Page.Total != len(want) {
		t.Fatalf("alice, who reads the renamed repository: %d, %v; want %v", code, taskIDs(got.Page.Runs), want)
	}
	for _, r := range got.Page.Runs {
		if !want[r.TaskID] || r.RepoID != f.ids["octo/alpha"] {
			t.Errorf("alice sees %s (repository id %d), want the old octo/alpha's receipts with id %d", r.TaskID, r.RepoID, f.ids["octo/alpha"])
		}
	}
}
