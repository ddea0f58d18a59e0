// Package webhook is the bot's event adapters: one githubapp.EventHandler
// per webhook the App subscribes to, each decoding its payload, dropping
// what the bot never acts on (other labels, bots, conversation, other
// apps' checks) and handing the rest to the engine's door
// (handlers.Entry) as a Delivery. What happens next is the engine's: the
// lifecycle table decides, the engine's parts act. MayAct is the same
// filtering, run by the intake on the raw payload before a worker decodes
// it.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// Engine is the door the adapters hand deliveries to: handlers.Entry, or a
// recording fake in the adapters' tests.
type Engine interface {
	Label(ctx context.Context, d handlers.Delivery) error
	Comment(ctx context.Context, d handlers.Delivery, body string) error
	Feedback(ctx context.Context, d handlers.Delivery, body, trigger string, reviewThread int64) error
	Opened(ctx context.Context, d handlers.Delivery) error
	Closed(ctx context.Context, d handlers.Delivery) error
	Rerun(ctx context.Context, d handlers.Delivery, externalID string) error
	ChecksChanged(ctx context.Context, d handlers.Delivery, sha, branch string, numbers []int) error
	MainChecks(ctx context.Context, d handlers.Delivery, sha string) error
	Pushed(ctx context.Context, d handlers.Delivery, branch, after string) error
	Installed(ctx context.Context, installation int64, repos []*github.Repository) error
	Removed(ctx context.Context, installation int64, repos []*github.Repository) error
	Uninstalled(ctx context.Context, installation int64) error

	// IgnoredSender, MayAddress and OwnApp are the cheap tests a delivery
	// is filtered with before the engine is asked to act.
	IgnoredSender(u *github.User) bool
	MayAddress(body []byte) bool
	OwnApp(slug string) bool
	TriggerLabel() string
	CheckName() string
}

var _ Engine = (*handlers.Entry)(nil)

// Adapters are the webhook handlers over one engine.
type Adapters struct{ e Engine }

// New builds the adapters that hand their events to e.
func New(e Engine) *Adapters { return &Adapters{e: e} }

// Handlers returns one handler per event the App subscribes to.
func (a *Adapters) Handlers() []githubapp.EventHandler {
	return []githubapp.EventHandler{
		adapter[github.IssuesEvent]{"issues", a.e, issues},
		&issueComment{a.e},
		adapter[github.PullRequestEvent]{"pull_request", a.e, pullRequest},
		adapter[github.PullRequestReviewEvent]{"pull_request_review", a.e, pullRequestReview},
		adapter[github.PullRequestReviewCommentEvent]{"pull_request_review_comment", a.e, pullRequestReviewComment},
		adapter[github.PushEvent]{"push", a.e, push},
		adapter[github.InstallationEvent]{"installation", a.e, installation},
		adapter[github.InstallationRepositoriesEvent]{"installation_repositories", a.e, installationRepositories},
		adapter[github.CheckRunEvent]{"check_run", a.e, checkRun},
		adapter[github.CheckSuiteEvent]{"check_suite", a.e, checkSuite},
		adapter[github.StatusEvent]{"status", a.e, status},
	}
}

// adapter is the handler of one webhook event: it decodes the payload as
// a T and hands it to act, which filters it and asks the engine.
type adapter[T any] struct {
	event string
	eng   Engine
	act   func(ctx context.Context, eng Engine, e *T, deliveryID string) error
}

// Handles implements githubapp.EventHandler.
func (a adapter[T]) Handles() []string { return []string{a.event} }

// Handle implements githubapp.EventHandler.
func (a adapter[T]) Handle(ctx context.Context, _, deliveryID string, payload []byte) error {
	var e T
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("parse %s event: %w", a.event, err)
	}
	return a.act(ctx, a.eng, &e, deliveryID)
}
