package githubtest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
)

const (
	inst  = 7
	repoA = "octo-org/alpha"
	repoB = "octo-org/beta"
)

// newFake starts the fake with two repositories of one installation and an
// App client (the fake takes any bearer JWT, as the bot's tests sign one).
func newFake(t *testing.T) (*githubtest.Server, *github.Client) {
	t.Helper()
	gh := githubtest.New(t, githubtest.Options{})
	gh.AddRepo(repoA, inst, nil)
	gh.AddRepo(repoB, inst, nil)
	return gh, tokenClient(t, gh, "app-jwt")
}

func mint(t *testing.T, app *github.Client, repo, contents string) string {
	t.Helper()
	tok, _, err := app.Apps.CreateInstallationToken(context.Background(), inst, &github.InstallationTokenOptions{
		Repositories: []string{repo},
		Permissions:  &github.InstallationPermissions{Contents: github.String(contents)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok.GetToken()
}

func tokenClient(t *testing.T, gh *githubtest.Server, token string) *github.Client {
	t.Helper()
	c := github.NewClient(nil).WithAuthToken(token)
	base, err := url.Parse(gh.URL())
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = base
	return c
}

// cloneAndCommit clones repo with token and commits a file on a new branch.
func cloneAndCommit(t *testing.T, gh *githubtest.Server, repo, token string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	if out, err := gh.GitAs("", token, "clone", "-q", gh.GitURL(repo), dir); err != nil {
		t.Fatalf("clone %s: %v\n%s", repo, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"checkout", "-qb", "agent/t-1-x"}, {"add", "x.txt"}, {"commit", "-qm", "x"}} {
		if out, err := gh.GitAs(dir, "", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// A contents:read token fetches but its push is refused with GitHub's 403
// message, which git prints; a contents:write token pushes.
func TestReadTokenCannotPush(t *testing.T) {
	t.Parallel()
	gh, app := newFake(t)
	read := mint(t, app, "alpha", "read")
	dir := cloneAndCommit(t, gh, repoA, read)
	out, err := gh.GitAs(dir, "", "push", "-q", "origin", "agent/t-1-x")
	if err == nil {
		t.Fatalf("a push with a contents:read token succeeded:\n%s", out)
	}
	if !strings.Contains(out, "remote: Permission to octo-org/alpha.git denied to "+githubtest.AppLogin) || !strings.Contains(out, "403") {
		t.Fatalf("want GitHub's 403 refusal, git printed:\n%s", out)
	}
	if gh.BranchSHA(repoA, "agent/t-1-x") != "" {
		t.Fatal("the refused push created the branch")
	}
	if out, err := gh.GitAs(dir, "", "fetch", "-q", "origin"); err != nil {
		t.Fatalf("fetch with a contents:read token: %v\n%s", err, out)
	}

	write := mint(t, app, "alpha", "write")
	if out, err := gh.GitAs(dir, write, "push", "-q", gh.GitURL(repoA), "agent/t-1-x"); err != nil {
		t.Fatalf("push with a contents:write token: %v\n%s", err, out)
	}
	if gh.BranchSHA(repoA, "agent/t-1-x") == "" {
		t.Fatal("the push did not land")
	}
}

// A token narrowed to one repository does not reach another of the same
// installation: GitHub answers "not found".
func TestTokenIsNarrowedToItsRepository(t *testing.T) {
	t.Parallel()
	gh, app := newFake(t)
	tok := mint(t, app, "alpha", "write")
	out, err := gh.GitAs("", tok, "ls-remote", gh.GitURL(repoB))
	if err == nil || !strings.Contains(out, "Repository not found.") {
		t.Fatalf("ls-remote of another repository: err %v\n%s", err, out)
	}
}

// DELETE /installation/token, authenticated with the token, revokes it:
// recorded with its time, and from then on the token is refused by the
// API and by git (401), and cannot be revoked twice.
func TestRevokedTokenIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	gh, app := newFake(t)
	keep := mint(t, app, "alpha", "read")
	tok := mint(t, app, "alpha", "write")
	c := tokenClient(t, gh, tok)
	ctx := context.Background()
	if _, _, err := c.Repositories.Get(ctx, "octo-org", "alpha"); err != nil {
		t.Fatalf("a live token is refused: %v", err)
	}
	before := time.Now()
	resp, err := c.Apps.RevokeInstallationToken(ctx)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v (%v)", err, resp)
	}
	got, ok := gh.Token(tok)
	if !ok || !got.Revoked() || got.RevokedAt.Before(before) {
		t.Fatalf("revocation not recorded with its time: %+v", got)
	}
	if r := gh.RevokedTokens(); len(r) != 1 || r[0].Value != tok {
		t.Fatalf("revoked tokens: %v", r)
	}
	if k, _ := gh.Token(keep); k.Revoked() {
		t.Fatal("revoking one token revoked another")
	}

	_, resp, err = c.Repositories.Get(ctx, "octo-org", "alpha")
	var er *github.ErrorResponse
	if !errors.As(err, &er) || resp.StatusCode != http.StatusUnauthorized || er.Message != "Bad credentials" {
		t.Fatalf("API call with a revoked token: %v", err)
	}
	if resp, err := c.Apps.RevokeInstallationToken(ctx); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoking a revoked token: %v", err)
	}
	out, err := gh.GitAs("", tok, "ls-remote", gh.GitURL(repoA))
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("git with a revoked token: err %v\n%s", err, out)
	}
	if out, err := gh.GitAs("", keep, "ls-remote", gh.GitURL(repoA)); err != nil {
		t.Fatalf("the other token stopped working: %v\n%s", err, out)
	}
	// An App JWT names no installation token: nothing to revoke.
	if resp, err := app.Apps.RevokeInstallationToken(ctx); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoke with the App JWT: %v", err)
	}
}
