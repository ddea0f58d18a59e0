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
)

// KindPreview marks the comment that links a pull request's preview; it is
// edited in place when the preview ends.
const KindPreview = "preview"

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
// reached through the bot's preview path of the run.
func (b *Base) preview(ctx context.Context, t thread, sc *scene) error {
	pr := sc.pr
	refuse := func(reason string) error {
		zerolog.Ctx(ctx).Info().Str("reason", reason).Msg("preview refused")
		return b.reply(ctx, t.gh, t.number, "github/preview_refused", PreviewRefusedData{Reason: reason})
	}
	switch {
	case pr == nil || pr.GetHead().GetRepo().GetID() != pr.GetBase().GetRepo().GetID():
		return refuse("this pull request comes from a fork: its code is not the repository's, and it gets no preview")
	case b.Receipts.PublicURL == "":
		return refuse("this bot serves no pages (its GitHub sign-in is not configured), so there is nowhere to show a preview")
	}
	head := pr.GetHead()
	// The configuration (dev command, setup, env, preview secrets) is the
	// base branch's: the head's is the agent's to write.
	cfg, err := b.loadConfig(ctx, t.installation, t.gh, pr.GetBase().GetRef(), sandboxcfg.Flags{})
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		return b.reply(ctx, t.gh, t.number, "github/config_error", ConfigErrorData{Source: cfgErr.Source, Error: cfgErr.Error(), File: sandboxcfg.FileName})
	}
	if err != nil {
		return err
	}
	if cfg.Dev.Command == "" || cfg.Dev.Port == 0 {
		return refuse(fmt.Sprintf("`.sandbox.yml` on the base branch `%s` names no dev server (`dev: { command, port }`); a preview runs the base branch's configuration, never the pull request's",
			sanitizeInline(pr.GetBase().GetRef(), 100)))
	}
	secrets, missing := b.previewSecrets(cfg)
	if len(missing) > 0 {
		return refuse(fmt.Sprintf("`dev.preview_secrets` in `.sandbox.yml` on `%s` names %s, which this bot does not pass to sandboxes (`SANDBOX_PASS_ENV`; provider keys never reach a preview)",
			sanitizeInline(pr.GetBase().GetRef(), 100), sanitizeInline(strings.Join(missing, ", "), 300)))
	}
	repo := t.repo.GetFullName()
	taskID := dispatch.NewTaskID(repo, t.number, dispatch.ModePreview, commentTrigger(t.commentID))
	if _, done := lastMarked(sc.marked, KindPreview, taskID); done {
		return nil // a redelivered /preview: its comment is there
	}
	ctx, log := withTask(ctx, taskID)
	key := previewLockKey(repo, t.number)
	if holder, err := b.Backend.Lock(ctx, key, taskID); errors.Is(err, dispatch.ErrLocked) {
		return refuse(fmt.Sprintf("a preview of this pull request runs already: %s", b.Receipts.LiveURL(holder)))
	} else if err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	started := false
	defer func() {
		if !started {
			_ = b.Backend.Unlock(context.WithoutCancel(ctx), key, taskID)
		}
	}()
	if full, err := b.capsFull(ctx, t); err != nil || full {
		if err != nil {
			return err
		}
		return refuse("every slot for runs is taken (the server's caps); ask again when a run has ended")
	}
	src, err := t.gh.Archive(ctx, head.GetSHA(), maxPreviewSource)
	if err != nil {
		return refuse("the pull request's code could not be read from GitHub: " + sanitizeInline(err.Error(), 200))
	}
	spec := b.previewSpec(t, taskID, head.GetSHA(), cfg, src, secrets)
	if _, err := b.Backend.Submit(ctx, spec); err != nil {
		return refuse("the preview sandbox could not start: " + sanitizeInline(b.Secrets.Redact(err.Error()), 300))
	}
	started = true
	log.Info().Str("head", head.GetSHA()).Dur("for", b.PreviewDuration).Msg("preview started")
	b.Runs.Follow(spec.Meta)
	return b.reply(ctx, t.gh, t.number, "github/preview", b.previewData(spec.Meta, head.GetSHA(), false, ""))
}

// previewSecrets are the pass-through secrets the base branch's
// configuration names for previews, and the names among them the bot does
// not pass to sandboxes.
func (b *Base) previewSecrets(cfg sandboxcfg.Resolved) (names, missing []string) {
	for _, n := range cfg.Dev.PreviewSecrets {
		if slices.Contains(b.SecretEnv, n) {
			names = append(names, n)
		} else {
			missing = append(missing, n)
		}
	}
	return names, missing
}

// previewSpec is the preview's run: no token, the code as an archive, and
// of the pass-through secrets only those named for previews.
func (b *Base) previewSpec(t thread, taskID, sha string, cfg sandboxcfg.Resolved, src []byte, secrets []string) dispatch.RunSpec {
	secs := int(b.PreviewDuration / time.Second)
	meta := dispatch.Meta{TaskID: taskID, Mode: dispatch.ModePreview, Repo: t.repo.GetFullName(), RepoID: t.repo.GetID(),
		Number: t.number, InstallationID: t.installation, Attempt: 1, DeliveryID: t.deliveryID, HeadSHA: sha}
	return dispatch.RunSpec{Meta: meta, Source: src, Order: dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion, TaskID: taskID, Mode: dispatch.ModePreview, Attempt: 1,
		Repo: meta.Repo, RepoID: meta.RepoID, Number: t.number, Config: cfg, BudgetUSD: cfg.MaxBudgetUSD, Source: dispatch.SourcePath,
		// The sandbox's own bound, past the time it serves: setup first.
		TimeoutMinutes: secs/60 + 1 + cfg.TimeoutMinutes, PreviewSeconds: secs, SecretEnv: secrets,
		RequestedAt: b.Now().UTC(),
	}}
}

func (b *Base) previewData(meta dispatch.Meta, sha string, ended bool, outcome string) PreviewData {
	live := b.Receipts.LiveURL(meta.TaskID)
	return PreviewData{
		Marker: Marker{Kind: KindPreview, TaskID: meta.TaskID, Mode: dispatch.ModePreview}.String(),
		URL:    live + "/preview/", LiveURL: live, SHA: shortSHA(sha), Minutes: int(b.PreviewDuration.Round(time.Minute) / time.Minute),
		Until: b.Now().Add(b.PreviewDuration).UTC().Format("15:04 UTC"), Ended: ended, Outcome: outcome,
	}
}

// capsFull reports whether a new run would be over the server's caps: a
// preview counts against them like any run, and waits in no queue.
func (b *Base) capsFull(ctx context.Context, t thread) (bool, error) {
	if !b.Caps.Any() {
		return false, nil
	}
	live, err := dispatch.LiveRuns(ctx, b.Backend)
	if err != nil {
		return false, err
	}
	total, inst, repo := len(live), 0, 0
	for _, m := range live {
		if m.InstallationID == t.installation {
			inst++
		}
		if strings.EqualFold(m.Repo, t.repo.GetFullName()) {
			repo++
		}
	}
	c := b.Caps
	return (c.Global > 0 && total >= c.Global) || (c.PerInstallation > 0 && inst >= c.PerInstallation) || (c.PerRepo > 0 && repo >= c.PerRepo), nil
}

// followPreview waits for a preview to end, says so in its comment and
// frees its lock and its slot.
func (r *Runs) followPreview(ctx context.Context, gh GitHub, meta dispatch.Meta) {
	log := zerolog.Ctx(ctx)
	st, err := r.c.Backend.Wait(ctx, meta.TaskID, nil)
	if ctx.Err() != nil {
		return // shutting down: the preview goes on and is reconciled later
	}
	outcome := "ended"
	if err != nil {
		outcome = "ended (its sandbox is gone)"
	} else if res, rerr := r.c.Backend.Result(ctx, meta.TaskID); rerr == nil && res != nil && res.Status != dispatch.StatusCompleted {
		msg := string(res.Status)
		if res.Error != nil {
			msg += ": " + res.Error.Message
		}
		outcome = "ended early: " + sanitizeInline(r.c.Secrets.Redact(msg), 300)
	} else if !st.StartedAt.IsZero() && !st.EndedAt.IsZero() {
		outcome = "ended after " + st.EndedAt.Sub(st.StartedAt).Round(time.Second).String()
	}
	if marked, err := r.c.botMarked(ctx, gh, meta.Number); err == nil {
		if c, ok := lastMarked(marked, KindPreview, meta.TaskID); ok {
			d := PreviewData{Marker: c.Marker.String(), SHA: shortSHA(meta.HeadSHA), Ended: true, Outcome: outcome, LiveURL: r.c.Receipts.LiveURL(meta.TaskID)}
			if body, err := r.c.Templates.Render("github/preview", d); err == nil {
				if err := gh.EditComment(ctx, c.Comment.GetID(), strings.TrimSpace(body)); err != nil {
					log.Warn().Err(err).Msg("edit the preview's comment")
				}
			}
		}
	}
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.c.Backend.Unlock(done, previewLockKey(meta.Repo, meta.Number), meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("release the preview's lock")
	}
	if err := r.c.Backend.Cleanup(done, meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("clean up the preview")
	}
	if r.onEnd != nil {
		r.onEnd(done, meta.TaskID)
	}
	log.Info().Str("outcome", outcome).Msg("preview ended")
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
