package webhook

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// installation hands the engine the App installed (its repositories are
// set up: the trigger and state labels, the routines) or removed (its
// runs stop).
func installation(ctx context.Context, eng Engine, e *github.InstallationEvent, deliveryID string) error {
	id := e.GetInstallation().GetID()
	ctx = zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str("action", e.GetAction()).Logger().WithContext(ctx)
	switch e.GetAction() {
	case "created", "new_permissions_accepted", "unsuspend":
		return eng.Installed(ctx, id, e.Repositories)
	case "deleted", "suspend":
		return eng.Uninstalled(ctx, id)
	}
	return nil
}

// installationRepositories hands the engine repositories added to an
// installation (set up) and removed from it (their runs stop).
func installationRepositories(ctx context.Context, eng Engine, e *github.InstallationRepositoriesEvent, deliveryID string) error {
	id := e.GetInstallation().GetID()
	ctx = zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Logger().WithContext(ctx)
	switch e.GetAction() {
	case "added":
		return eng.Installed(ctx, id, e.RepositoriesAdded)
	case "removed":
		return eng.Removed(ctx, id, e.RepositoriesRemoved)
	}
	return nil
}
