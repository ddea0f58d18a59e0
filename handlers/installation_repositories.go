package handlers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// InstallationRepositories sets up repositories added to an installation
// and stops work in removed ones.
type InstallationRepositories struct{ b *Base }

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
		return h.b.installs.setUpRepos(ctx, id, e.RepositoriesAdded)
	case "removed":
		removed := map[string]bool{}
		for _, r := range e.RepositoriesRemoved {
			removed[r.GetFullName()] = true
		}
		return h.b.installs.stopRuns(ctx, func(installation int64, repo string) bool { return installation == id && removed[repo] })
	}
	return nil
}
