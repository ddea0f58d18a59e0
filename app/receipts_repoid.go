package app

import (
	"context"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// withRepoIDs stores receipts with their repository's id. The dashboard
// decides access by id, which GitHub keeps through a rename or a transfer
// and gives a new repository of a deleted one's name afresh. A run started
// by this bot carries the id in its metadata; for one that does not (an
// older bot's), the id is read through the run's own installation, so a
// name that now belongs to a repository the installation cannot see stays
// 0: such a receipt shows to the operator only.
type withRepoIDs struct {
	store receipts.Receipts
	cc    githubapp.ClientCreator
	log   zerolog.Logger
}

// Keep stores the receipt of an ended run.
func (w withRepoIDs) Keep(ctx context.Context, e handlers.EndedRun) error {
	m := e.Meta
	r := receipts.Run{
		TaskID: m.TaskID, Repo: m.Repo, RepoID: m.RepoID, InstallationID: m.InstallationID, Number: m.Number, Issue: e.Issue,
		Title: e.Title, Mode: string(m.Mode), Status: e.Status, Attempt: m.Attempt, Branch: e.Branch, URL: e.URL,
		CostUSD: e.Usage.TotalCostUSD, DurationSeconds: e.DurationSeconds, InputTokens: e.Usage.Input, OutputTokens: e.Usage.Output,
		Steps: e.Usage.Steps, Error: e.Error, EndedAt: e.EndedAt, CostUnknown: !e.CostKnown, Requester: m.Requester, Model: m.Model,
	}
	if r.RepoID == 0 {
		r.RepoID = w.repoID(ctx, r)
	}
	return w.store.Put(ctx, r)
}

// repoID asks GitHub; a failure is logged and gives 0.
func (w withRepoIDs) repoID(ctx context.Context, r receipts.Run) int64 {
	owner, name, ok := strings.Cut(r.Repo, "/")
	if !ok || r.InstallationID == 0 || w.cc == nil {
		return 0
	}
	log := w.log.With().Str("task_id", r.TaskID).Str("repo", r.Repo).Int64("installation", r.InstallationID).Logger()
	client, err := w.cc.NewInstallationClient(r.InstallationID)
	if err != nil {
		log.Warn().Err(err).Msg("receipt kept without its repository id (dashboard: operator only)")
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	repo, _, err := client.Repositories.Get(ctx, owner, name)
	if err != nil {
		log.Warn().Err(err).Msg("receipt kept without its repository id (dashboard: operator only)")
		return 0
	}
	return repo.GetID()
}
