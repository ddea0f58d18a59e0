package follow

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Sandbox tokens. A sandbox gets an installation token narrowed to its one
// repository and to contents, read-only unless the run pushes. The bot
// remembers every token it minted for a run and revokes them all when the
// run ends, whatever the outcome, so a token copied out of a sandbox dies
// with the run instead of living out its hour.

// TokenPermission is the contents permission a run's token carries: plan
// and task runs only read the repository, so a hostile agent in them has
// nothing to push with.
func TokenPermission(mode dispatch.Mode) string {
	if lifecycle.KindOf(mode).Aside {
		return "" // a preview gets its code as an archive and no token
	}
	if mode.WritesCode() {
		return "write"
	}
	return "read"
}

// runTokens remembers the tokens minted for each run until they are
// revoked, oldest first, and which of them the sandbox holds now.
type runTokens struct {
	mu      sync.Mutex
	byTask  map[string][]string
	current map[string]string
}

// add remembers a token minted for a run, before it is handed over: the
// run's end revokes it even if its delivery failed half-way.
func (t *runTokens) add(taskID, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTask == nil {
		t.byTask, t.current = map[string][]string{}, map[string]string{}
	}
	t.byTask[taskID] = append(t.byTask[taskID], token)
}

// delivered records that the sandbox holds token now.
func (t *runTokens) delivered(taskID, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != nil {
		t.current[taskID] = token
	}
}

func (t *runTokens) has(taskID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byTask[taskID]) > 0
}

// adopt remembers the token a run holds when nothing is remembered for it
// yet, and reports whether it did.
func (t *runTokens) adopt(taskID, token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byTask[taskID]) > 0 {
		return false
	}
	if t.byTask == nil {
		t.byTask, t.current = map[string][]string{}, map[string]string{}
	}
	t.byTask[taskID], t.current[taskID] = []string{token}, token
	return true
}

// take forgets and returns every token of the run.
func (t *runTokens) take(taskID string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	toks := t.byTask[taskID]
	delete(t.byTask, taskID)
	delete(t.current, taskID)
	return toks
}

// takeSuperseded forgets and returns the run's tokens minted before the
// one the sandbox holds now.
func (t *runTokens) takeSuperseded(taskID string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	toks := t.byTask[taskID]
	for i, tok := range toks {
		if tok == t.current[taskID] {
			t.byTask[taskID] = toks[i:]
			return toks[:i]
		}
	}
	return nil
}

// revoke revokes tokens of a run, logging failures (never the token): a
// token that cannot be revoked still expires within its hour.
func (r *Runs) revoke(ctx context.Context, taskID string, tokens []string, why string) {
	if len(tokens) == 0 {
		return
	}
	// The run is over: finish even if the bot begins to shut down.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	log := zerolog.Ctx(ctx)
	failed := 0
	for i, tok := range tokens {
		if err := r.d.Hub.RevokeToken(ctx, tok); err != nil {
			failed++
			log.Warn().Err(err).Str("task_id", taskID).Int("token", i+1).Int("tokens", len(tokens)).Str("why", why).
				Msg("could not revoke a sandbox token; it expires within the hour")
		}
	}
	log.Info().Str("task_id", taskID).Int("revoked", len(tokens)-failed).Int("failed", failed).Str("why", why).Msg("sandbox tokens revoked")
}

// adoptToken remembers the token of a run this bot process did not start
// (it began before a restart, or on another replica), read back from the
// backend, so the run's end revokes it too.
func (r *Runs) adoptToken(ctx context.Context, taskID string) {
	tr, ok := r.d.Backend.(dispatch.TokenReader)
	if !ok || r.tokens.has(taskID) {
		return
	}
	tok, err := tr.CurrentToken(ctx, taskID)
	if errors.Is(err, dispatch.ErrNotFound) {
		return // gone already: Wait reports it
	}
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read back the run's token; it is not revoked when the run ends, but expires within the hour")
		return
	}
	if tok != "" {
		// A bot that did not mint it must still keep it out of what it
		// posts (a task's artifacts may quote it).
		r.d.Secrets.AddToken(tok, time.Time{})
	}
	if tok != "" && r.tokens.adopt(taskID, tok) {
		zerolog.Ctx(ctx).Debug().Msg("adopted the token of a run started earlier")
	}
}

// endRun revokes every token minted for a run that ended.
func (r *Runs) endRun(ctx context.Context, taskID string) {
	r.revoke(ctx, taskID, r.tokens.take(taskID), "run ended")
}

// supersededGrace is how long a replaced token stays valid after its
// successor was delivered: Nomad renders the new token a moment after the
// bot writes it, and a git operation in flight still holds the old one.
func (r *Runs) supersededGrace() time.Duration {
	return min(r.d.TokenRefresh/2, time.Minute)
}

// refreshTokens replaces the run's token before it expires, until done is
// closed. Each new token is remembered before it is delivered, so the run's
// end revokes it too; the ones it replaces are revoked after a grace period.
func (r *Runs) refreshTokens(ctx context.Context, meta dispatch.Meta, done <-chan struct{}) {
	tick := time.NewTicker(r.d.TokenRefresh)
	defer tick.Stop()
	_, repo, _ := strings.Cut(meta.Repo, "/")
	log := zerolog.Ctx(ctx)
	var retire <-chan time.Time
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-retire:
			retire = nil
			r.revoke(ctx, meta.TaskID, r.tokens.takeSuperseded(meta.TaskID), "superseded by a refresh")
		case <-tick.C:
			tok, _, err := r.d.Hub.MintToken(ctx, meta.InstallationID, repo, TokenPermission(meta.Mode))
			if err != nil {
				log.Warn().Err(err).Msg("refresh run token")
				continue
			}
			// Remembered first: a delivery that fails may still have
			// reached the sandbox, so this token too lives until the run
			// ends, and the one the sandbox had stays valid.
			r.tokens.add(meta.TaskID, tok)
			if err := r.d.Backend.RefreshToken(ctx, meta.TaskID, tok); err != nil {
				log.Warn().Err(err).Msg("deliver refreshed run token")
				continue
			}
			r.tokens.delivered(meta.TaskID, tok)
			if retire == nil {
				retire = time.After(r.supersededGrace())
			}
		}
	}
}

// Handed follows up a submission: the run keeps token until it ends,
// unless the submission failed or a run with this id existed already (a
// redelivery; that run has its own token), in which case nobody holds this
// one and it is revoked at once.
func (r *Runs) Handed(ctx context.Context, taskID, token string, created bool, submitErr error) {
	if submitErr == nil && created {
		r.tokens.add(taskID, token)
		r.tokens.delivered(taskID, token)
		return
	}
	why := "the run existed already"
	if submitErr != nil {
		why = "submission failed"
	}
	r.revoke(ctx, taskID, []string{token}, why)
}
