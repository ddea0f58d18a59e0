package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// Installation hands the engine the App installed (its repositories are
// set up: the trigger and state labels, the routines) or removed (its
// runs stop).
type Installation struct{ e Engine }

var _ githubapp.EventHandler = &Installation{}

// Handles implements githubapp.EventHandler.
func (h *Installation) Handles() []string { return []string{"installation"} }

// Handle implements githubapp.EventHandler.
func (h *Installation) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.InstallationEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse installation event: %w", err)
	}
	id := e.GetInstallation().GetID()
	ctx = zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str("action", e.GetAction()).Logger().WithContext(ctx)
	switch e.GetAction() {
	case "created", "new_permissions_accepted", "unsuspend":
		return h.e.Installed(ctx, id, e.Repositories)
	case "deleted", "suspend":
		return h.e.Uninstalled(ctx, id)
	}
	return nil
}

// InstallationRepositories hands the engine repositories added to an
// installation (set up) and removed from it (their runs stop).
type InstallationRepositories struct{ e Engine }

var _ githubapp.EventHandler = &InstallationRepositories{}

// Handles implements githubapp.EventHandler.
func (h *InstallationRepositories) Handles() []string {
	return []string{"installation_repositories"}
}

// Handle implements githubapp.EventHandler.
func (h *InstallationRepositories) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var e github.InstallationRepositoriesEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse installation_repositories event: %w", err)
	}
	id := e.GetInstallation().GetID()
	ctx = zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Logger().WithContext(ctx)
	switch e.GetAction() {
	case "added":
		return h.e.Installed(ctx, id, e.RepositoriesAdded)
	case "removed":
		return h.e.Removed(ctx, id, e.RepositoriesRemoved)
	}
	return nil
}
