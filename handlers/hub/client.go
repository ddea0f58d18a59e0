package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/appconfig"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// goHub is the seam over go-github. Its clients come from the server's
// ClientCreator, which the server wraps in its rate limiter (app's
// githubPacer), so every call here is paced below GitHub's limits.
type goHub struct {
	cc githubapp.ClientCreator
	// download fetches what the API redirects to elsewhere (an Actions
	// job's log), without the installation's credential.
	download *http.Client
	// loader reads .sandbox.yml. go-githubapp's owner default is off: it
	// only replaces a missing repository file, while the org's file is a
	// layer beneath the repository's (loadConfig reads both).
	loader *appconfig.Loader
}

// New is the seam over go-github, its clients made by cc (wrapped by the
// server in its rate limiter).
func New(cc githubapp.ClientCreator) Hub {
	return &goHub{cc: cc, loader: appconfig.NewLoader([]string{sandboxcfg.FileName}, appconfig.WithOwnerDefault("", nil)),
		download: &http.Client{Timeout: downloadTimeout}}
}

func (h *goHub) Repo(installation int64, fullName string) (GitHub, error) {
	client, err := h.cc.NewInstallationClient(installation)
	if err != nil {
		return nil, fmt.Errorf("client of installation %d: %w", installation, err)
	}
	return newGoRepo(client, fullName, h.loader, h.download), nil
}

func (h *goHub) AppSlug(ctx context.Context) (string, error) {
	app, err := h.cc.NewAppClient()
	if err != nil {
		return "", fmt.Errorf("create app client: %w", err)
	}
	a, _, err := app.Apps.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("GET /app with the App's JWT: %w", err)
	}
	return a.GetSlug(), nil
}

func (h *goHub) MintToken(ctx context.Context, installation int64, repo, contents string) (string, time.Time, error) {
	app, err := h.cc.NewAppClient()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("create app client: %w", err)
	}
	tok, _, err := app.Apps.CreateInstallationToken(ctx, installation, &github.InstallationTokenOptions{
		Repositories: []string{repo},
		Permissions:  &github.InstallationPermissions{Contents: github.String(contents)},
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint contents:%s token for installation %d, repo %s: %w", contents, installation, repo, err)
	}
	return tok.GetToken(), tok.GetExpiresAt().Time, nil
}

// revokeAttempts and revokeBackoff bound the retries of one revocation: a
// token that cannot be revoked expires within the hour anyway, and posting
// the run's result must not wait on it for long.
const (
	revokeAttempts = 3
	revokeBackoff  = 250 * time.Millisecond
)

// RevokeToken uses GitHub's DELETE /installation/token, which a token may
// only do for itself. A 401 means the token is already dead.
func (h *goHub) RevokeToken(ctx context.Context, token string) error {
	client, err := h.cc.NewTokenClient(token)
	if err != nil {
		return fmt.Errorf("create client for revocation: %w", err)
	}
	var last error
	for attempt := 1; attempt <= revokeAttempts; attempt++ {
		resp, err := client.Apps.RevokeInstallationToken(ctx)
		if err == nil || (resp != nil && resp.StatusCode == http.StatusUnauthorized) {
			return nil
		}
		last = err
		if resp != nil && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			break // GitHub will answer the same again
		}
		if attempt == revokeAttempts {
			break
		}
		select {
		case <-time.After(revokeBackoff * time.Duration(attempt*attempt)):
			continue
		case <-ctx.Done():
		}
		break
	}
	if ctx.Err() != nil {
		last = errors.Join(last, ctx.Err())
	}
	return fmt.Errorf("revoke installation token (%d attempts): %w", revokeAttempts, last)
}

// goRepo is GitHub over go-github: one part per interface GitHub is made
// of, each over the same repoClient (repo.go), and nothing of its
// own, so no one type carries the whole seam's 38 methods. What each call
// does is in its part: conversation.go, pulls.go,
// ci.go, gitdata.go.
type goRepo struct {
	*repoClient // FullName
	goConversation
	goPeople
	goPullRequests
	goChecks
	goCI
	goGitData
}

func newGoRepo(client *github.Client, fullName string, loader *appconfig.Loader, download *http.Client) *goRepo {
	owner, name, _ := strings.Cut(fullName, "/")
	r := &repoClient{c: client, owner: owner, name: name}
	return &goRepo{
		repoClient:     r,
		goConversation: goConversation{repoClient: r, loader: loader},
		goPeople:       goPeople{r},
		goPullRequests: goPullRequests{r},
		goChecks:       goChecks{r},
		goCI:           goCI{repoClient: r, download: download},
		goGitData:      goGitData{r},
	}
}
