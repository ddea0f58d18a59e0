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
		&Issues{a.e}, &IssueComment{a.e}, &PullRequest{a.e}, &PullRequestReview{a.e}, &PullRequestReviewComment{a.e},
		&Push{a.e}, &Installation{a.e}, &InstallationRepositories{a.e}, &CheckRun{a.e}, &CheckSuite{a.e}, &Status{a.e},
	}
}
