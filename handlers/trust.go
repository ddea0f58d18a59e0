package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v62/github"
	lru "github.com/hashicorp/golang-lru"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// What the bot trusts, and for how long it remembers it.
const (
	// permissionTTL bounds how stale a cached permission may be: long
	// enough that a burst of commands costs one lookup, short enough that
	// a revoked writer is refused within a minute.
	permissionTTL = time.Minute
	// refusalInterval is how often one person is told, on one issue, that
	// they may not drive the bot.
	refusalInterval = time.Hour
	trustCacheSize  = 4096
)

// trustState is what the handlers remember between events: the App's own
// bot account, recent permission lookups and recent refusals. It lives in
// memory; each replica keeps its own (see refuseOnce for what that means).
type trustState struct {
	// idMu serialises LoadIdentity's GET /app; login is read without it,
	// so the webhook intake's pre-filter (slug) never waits on GitHub.
	idMu  sync.Mutex
	login atomic.Pointer[string] // "<slug>[bot]", nil until read

	mu sync.Mutex // refusals' check-and-set

	perms    *lru.Cache // "owner/repo\x00login" -> permEntry
	refusals *lru.Cache // "owner/repo#n\x00login" -> time.Time
}

type permEntry struct {
	ok bool
	at time.Time
}

func newTrustState() *trustState {
	perms, _ := lru.New(trustCacheSize)    // only fails for a size <= 0
	refusals, _ := lru.New(trustCacheSize) // idem
	return &trustState{perms: perms, refusals: refusals}
}

// LoadIdentity reads the App's slug with the App's JWT (GET /app) and
// remembers its bot account, "<slug>[bot]": the only author whose hidden
// markers and pull requests the bot believes. The server calls it at start;
// handlers call it again if that failed.
func (c *core) LoadIdentity(ctx context.Context) (string, error) {
	c.trust.idMu.Lock()
	defer c.trust.idMu.Unlock()
	if login := c.trust.login.Load(); login != nil {
		return *login, nil
	}
	slug, err := c.Hub.AppSlug(ctx)
	if err != nil {
		return "", fmt.Errorf("read the App's identity: %w", err)
	}
	if slug == "" {
		return "", fmt.Errorf("read the App's identity: GET /app answered without a slug")
	}
	login := slug + "[bot]"
	c.trust.login.Store(&login)
	return login, nil
}

// canWrite is fetchCanWrite behind a short cache per repository and login.
// Errors are not cached.
func (c *core) canWrite(ctx context.Context, gh hub.GitHub, login string) (bool, error) {
	key := gh.FullName() + "\x00" + login
	now := c.Now()
	if v, ok := c.trust.perms.Get(key); ok {
		if e := v.(permEntry); now.Sub(e.at) < permissionTTL {
			return e.ok, nil
		}
	}
	ok, err := c.fetchCanWrite(ctx, gh, login)
	if err != nil {
		return false, err
	}
	c.trust.perms.Add(key, permEntry{ok: ok, at: now})
	return ok, nil
}

// fetchCanWrite reports whether login may drive the bot on the
// repository: write, maintain or admin permission, or a place on the
// operator's allowlist.
func (c *core) fetchCanWrite(ctx context.Context, gh hub.GitHub, login string) (bool, error) {
	if slices.Contains(c.AllowUsers, login) {
		return true, nil
	}
	perm, err := gh.Permission(ctx, login)
	if err != nil {
		return false, err
	}
	// GitHub reports maintain as "write" in this legacy field.
	switch perm {
	case "admin", "maintain", "write":
		return true, nil
	}
	for _, team := range c.AllowTeams {
		member, err := gh.TeamMember(ctx, team, login)
		if err != nil {
			return false, err
		}
		if member {
			return true, nil
		}
	}
	return false, nil
}

// gatekeeper says who may act: which senders the handlers ignore, who
// may ask for what, and the one polite refusal for the rest.
type gatekeeper struct{ c *core }

// isIgnoredSender is true for bots (the app itself included) unless the
// operator allowed them.
func (gk *gatekeeper) isIgnoredSender(u *github.User) bool {
	if u == nil {
		return true
	}
	if u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]") {
		return !slices.Contains(gk.c.AllowBots, u.GetLogin())
	}
	return false
}

// mayAsk is who may act, before anything is read: anyone may ask for
// /status, a push and failing checks are the repository's own, and the
// rest is for writers
// (write, maintain, admin, or the operator's allowlist). Anyone else gets
// one polite refusal per issue per hour; a review by one gets nothing.
func (gk *gatekeeper) mayAsk(ctx context.Context, t thread, ev event) (bool, error) {
	if ev.kind == lifecycle.Status || ev.kind == lifecycle.Push || ev.kind == lifecycle.ChecksFailed {
		return true, nil
	}
	ok, err := gk.c.canWrite(ctx, t.gh, t.sender)
	if err != nil || ok {
		return ok, err
	}
	log := zerolog.Ctx(ctx).Info().Str("sender", t.sender)
	if ev.kind == lifecycle.Review {
		log.Msg("review feedback by a non-writer; not revising")
		return false, nil
	}
	log.Msg("refusing: sender cannot write to the repository")
	return false, gk.refuse(ctx, t, ev.tried)
}

// refuseOnce reports whether login should be told (again) on this issue
// that they may not drive the bot, and records it: at most one refusal per
// person per issue per hour, so a stranger repeating commands cannot make
// the bot spam the thread. The memory is per replica: with several
// replicas behind a load balancer a person can get one refusal from each
// per hour, which is still bounded; nothing runs either way.
func (gk *gatekeeper) refuseOnce(fullRepo string, number int, login string) bool {
	return gk.c.trust.once(fmt.Sprintf("%s#%d\x00%s", fullRepo, number, login), gk.c.Now(), refusalInterval)
}

// once reports whether key was not recorded within interval before now,
// and records it: the check-and-set behind every "at most one reply per
// ..." rule.
func (ts *trustState) once(key string, now time.Time, interval time.Duration) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if v, ok := ts.refusals.Get(key); ok && now.Sub(v.(time.Time)) < interval {
		return false
	}
	ts.refusals.Add(key, now)
	return true
}

// refuse tells the sender, at most once per issue per hour, that only
// writers can do what they tried; nothing runs either way.
func (gk *gatekeeper) refuse(ctx context.Context, t thread, tried string) error {
	if !gk.refuseOnce(t.gh.FullName(), t.number, t.sender) {
		zerolog.Ctx(ctx).Info().Str("sender", t.sender).Msg("refused within the hour already; not replying again")
		return nil
	}
	return gk.c.reply(ctx, t.gh, t.number, "github/refusal", RefusalData{User: t.sender, Action: tried})
}
