package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// maxPreviewSource bounds the archive of a preview's code the bot fetches
// and hands the sandbox.
const maxPreviewSource = 100 << 20

// PreviewData is github/preview: a preview's link, then its end.
type PreviewData struct {
	Marker string
	// URL is where the running app is (the run's preview path), LiveURL
	// the run's page.
	URL, LiveURL string
	SHA          string
	Minutes      int
	Until        string
	// Ended says the preview is over, and Outcome how.
	Ended   bool
	Outcome string
}

// PreviewRefusedData is github/preview_refused: why no preview starts.
type PreviewRefusedData struct {
	Reason string
}

// previewLockKey holds one preview per pull request; it is not the PR's
// lock, so a preview never keeps a revise or rebase run waiting.
func previewLockKey(repo string, number int) string {
	return "preview/" + dispatch.LockKey(repo, number)
}

// preview starts a preview sandbox of the pull request's head: task mode
// (one user, no inner daemon, no token, nothing pushed), the code as the
// tarball the bot fetched, the dev server served for PreviewDuration and
// reached through the bot's preview path of the run. It checks what only
// a preview needs, then starts it the one way every run starts
// (starter.begin), under the preview's policy (policyOf).
func (b *Base) preview(ctx context.Context, t thread, sc *scene) error {
	pr := sc.pr
	p := previewRun{c: b.c}
	switch {
	case pr == nil || pr.GetHead().GetRepo().GetID() != pr.GetBase().GetRepo().GetID():
		return p.refuse(ctx, t.gh, t.number, "this pull request comes from a fork: its code is not the repository's, and it gets no preview")
	case b.Receipts.PublicURL == "":
		return p.refuse(ctx, t.gh, t.number, "this bot serves no pages (its GitHub sign-in is not configured), so there is nowhere to show a preview")
	}
	// The configuration (dev command, setup, env, preview secrets) is the
	// base branch's: the head's is the agent's to write.
	cfg, err := b.c.loadConfig(ctx, t.installation, t.gh, pr.GetBase().GetRef(), sandboxcfg.Flags{})
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		return b.c.reply(ctx, t.gh, t.number, "github/config_error", ConfigErrorData{Source: cfgErr.Source, Error: cfgErr.Error(), File: sandboxcfg.FileName})
	}
	if err != nil {
		return err
	}
	if cfg.Dev.Command == "" || cfg.Dev.Port == 0 {
		return p.refuse(ctx, t.gh, t.number, fmt.Sprintf("`.sandbox.yml` on the base branch `%s` names no dev server (`dev: { command, port }`); a preview runs the base branch's configuration, never the pull request's",
			sanitize.Inline(pr.GetBase().GetRef(), 100)))
	}
	var missing []string
	if p.secrets, missing = previewSecrets(cfg, b.SecretEnv); len(missing) > 0 {
		return p.refuse(ctx, t.gh, t.number, fmt.Sprintf("`dev.preview_secrets` in `.sandbox.yml` on `%s` names %s, which this bot does not pass to sandboxes (`SANDBOX_PASS_ENV`; provider keys never reach a preview)",
			sanitize.Inline(pr.GetBase().GetRef(), 100), sanitize.Inline(strings.Join(missing, ", "), 300)))
	}
	p.sha = pr.GetHead().GetSHA()
	req := startRequest{InstallationID: t.installation, Repo: t.repo, Number: t.number, IsPR: true, Issue: t.number, Mode: dispatch.ModePreview,
		Trigger: commentTrigger(t.commentID), DeliveryID: t.deliveryID, Sender: t.sender, CommentID: t.commentID, Command: "preview"}
	l := newLaunch(req, dispatch.ModePreview, dispatch.NewTaskID(t.repo.GetFullName(), t.number, dispatch.ModePreview, req.Trigger), p)
	l.cfg, l.marked, l.haveMarked = cfg, sc.marked, true
	return b.starts.begin(ctx, t.gh, l)
}

// previewSecrets are the pass-through secrets the base branch's
// configuration names for previews, and the names among them the bot does
// not pass to sandboxes (passed, the server's SecretEnv).
func previewSecrets(cfg sandboxcfg.Resolved, passed []string) (names, missing []string) {
	for _, n := range cfg.Dev.PreviewSecrets {
		if slices.Contains(passed, n) {
			names = append(names, n)
		} else {
			missing = append(missing, n)
		}
	}
	return names, missing
}

// previewRun is the kind of a /preview's run: its spec is the PR head's
// code as an archive with the secrets named for previews and no token;
// every answer but the link is a refusal saying why no preview starts.
type previewRun struct {
	c *core
	// sha is the PR head the preview serves; secrets are the pass-through
	// secrets it gets.
	sha     string
	secrets []string
}

// refusal is why a preview does not start, for its refusal reply.
type refusal string

func (r refusal) Error() string { return string(r) }

func (p previewRun) refuse(ctx context.Context, gh hub.GitHub, number int, reason string) error {
	zerolog.Ctx(ctx).Info().Str("reason", reason).Msg("preview refused")
	return p.c.reply(ctx, gh, number, "github/preview_refused", PreviewRefusedData{Reason: reason})
}

func (p previewRun) busy(ctx context.Context, gh hub.GitHub, l launch, holder string) error {
	return p.refuse(ctx, gh, l.req.Number, fmt.Sprintf("a preview of this pull request runs already: %s", p.c.Receipts.LiveURL(holder)))
}

// failed refuses a preview that the caps, GitHub or the backend kept from
// starting; any other error is the handler's.
func (p previewRun) failed(ctx context.Context, gh hub.GitHub, l launch, err error, locked bool) error {
	var why refusal
	var sub *submitError
	switch {
	case errors.Is(err, errCapsFull):
		why = "every slot for runs is taken (the server's caps); ask again when a run has ended"
	case errors.As(err, &sub):
		why = refusal("the preview sandbox could not start: " + sanitize.Inline(p.c.Secrets.Redact(sub.err.Error()), 300))
	case !errors.As(err, &why):
		return err
	}
	return p.refuse(ctx, gh, l.req.Number, string(why))
}

// build fetches the PR head's code and writes the preview's run: no
// token, the code as an archive, and of the pass-through secrets only
// those named for previews.
func (p previewRun) build(ctx context.Context, gh hub.GitHub, l launch) (built, error) {
	src, err := gh.Archive(ctx, p.sha, maxPreviewSource)
	if err != nil {
		return built{}, refusal("the pull request's code could not be read from GitHub: " + sanitize.Inline(err.Error(), 200))
	}
	secs := int(p.c.PreviewDuration / time.Second)
	req, cfg := l.req, l.cfg
	meta := dispatch.Meta{TaskID: l.taskID, Mode: dispatch.ModePreview, Repo: req.Repo.GetFullName(), RepoID: req.Repo.GetID(),
		Number: req.Number, InstallationID: req.InstallationID, Attempt: 1, DeliveryID: req.DeliveryID, HeadSHA: p.sha,
		Requester: req.Sender, Model: cfg.Model}
	return built{spec: dispatch.RunSpec{Meta: meta, Source: src, Order: dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion, TaskID: l.taskID, Mode: dispatch.ModePreview, Attempt: 1,
		Repo: meta.Repo, RepoID: meta.RepoID, Number: req.Number, Config: cfg, BudgetUSD: cfg.MaxBudgetUSD, Source: dispatch.SourcePath,
		// The sandbox's own bound, past the time it serves: setup first.
		TimeoutMinutes: secs/60 + 1 + cfg.TimeoutMinutes, PreviewSeconds: secs, SecretEnv: p.secrets,
		RequestedAt: p.c.Now().UTC(),
	}}}, nil
}

// announce posts the preview's link.
func (p previewRun) announce(ctx context.Context, gh hub.GitHub, l launch, r built) error {
	zerolog.Ctx(ctx).Info().Str("head", p.sha).Dur("for", p.c.PreviewDuration).Msg("preview started")
	live := p.c.Receipts.LiveURL(l.taskID)
	return p.c.reply(ctx, gh, l.req.Number, "github/preview", PreviewData{
		Marker: markers.Marker{Kind: markers.KindPreview, TaskID: l.taskID, Mode: dispatch.ModePreview}.String(),
		URL:    live + "/preview/", LiveURL: live, SHA: shortSHA(p.sha), Minutes: int(p.c.PreviewDuration.Round(time.Minute) / time.Minute),
		Until: p.c.Now().Add(p.c.PreviewDuration).UTC().Format("15:04 UTC"),
	})
}

// AsideEnded says in a preview's comment that it ended, and frees its lock
// and its slot (follow.Ender).
func (e *runEnds) AsideEnded(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, st dispatch.RunStatus, err error) {
	log := zerolog.Ctx(ctx)
	outcome := "ended"
	if err != nil {
		outcome = "ended (its sandbox is gone)"
	} else if res, rerr := e.c.Backend.Result(ctx, meta.TaskID); rerr == nil && res != nil && res.Status != dispatch.StatusCompleted {
		msg := string(res.Status)
		if res.Error != nil {
			msg += ": " + res.Error.Message
		}
		outcome = "ended early: " + sanitize.Inline(e.c.Secrets.Redact(msg), 300)
	} else if !st.StartedAt.IsZero() && !st.EndedAt.IsZero() {
		outcome = "ended after " + st.EndedAt.Sub(st.StartedAt).Round(time.Second).String()
	}
	if marked, err := e.c.botMarked(ctx, gh, meta.Number); err == nil {
		if c, ok := markers.Last(marked, markers.KindPreview, meta.TaskID); ok {
			d := PreviewData{Marker: c.Marker.String(), SHA: shortSHA(meta.HeadSHA), Ended: true, Outcome: outcome, LiveURL: e.c.Receipts.LiveURL(meta.TaskID)}
			if body, err := e.c.Templates.Render("github/preview", d); err == nil {
				if err := gh.EditComment(ctx, c.Comment.GetID(), strings.TrimSpace(body)); err != nil {
					log.Warn().Err(err).Msg("edit the preview's comment")
				}
			}
		}
	}
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	// A preview serves the pull request's code and runs no agent: it
	// spends nothing of the model budget it reserved.
	e.keep.settleCost(done, meta.TaskID, 0, true)
	if err := e.c.Backend.Unlock(done, previewLockKey(meta.Repo, meta.Number), meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("release the preview's lock")
	}
	if err := e.c.Backend.Cleanup(done, meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("clean up the preview")
	}
	e.slots.freeSlot(done, meta.TaskID)
	log.Info().Str("outcome", outcome).Msg("preview ended")
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
