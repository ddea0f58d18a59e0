package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/schedule"
)

// Routines start work by themselves: a .sandbox.yml on the default branch
// (or the organisation's) declares them, and each tick of a schedule
// opens an issue by the App whose plan waits for /approve like any other.
//
// Every replica keeps the same catalogue (routines_catalog.go) and the
// same schedule, and wakes at the same ticks; the routine books in the
// backend (dispatch.RoutineBooks) let one of them claim each tick, so a
// tick runs once across replicas and restarts. Between ticks nothing
// runs: the scheduler computes every routine's next tick and sleeps on
// the bot's clock (core.Now, core.AfterFunc) until the earliest.
type Routines struct {
	c *core
	// plan starts the plan of an issue a routine opened (Base.routinePlan).
	plan func(ctx context.Context, installation int64, repo *github.Repository, issue *github.Issue, trigger string) error
	// holder names this replica in the claims it takes.
	holder string
	cat    *routineCatalog
	// now and after are the scheduler's clock: the bot's (core.Now,
	// core.AfterFunc) unless the server gives it another
	// (Base.SetRoutineClock).
	now   func() time.Time
	after func(d time.Duration, f func()) (stop func() bool)

	mu      sync.Mutex
	ctx     context.Context // the scheduler's; nil until Start
	log     zerolog.Logger
	stop    func() bool // the armed timer
	at      time.Time   // when it fires
	stopped bool
	// fires counts the claims being acted on, so Stop can wait for them.
	fires sync.WaitGroup
}

// routineTarget is one routine of one repository, as the scheduler keeps it.
type routineTarget struct {
	installation int64
	repo         *github.Repository
	r            sandboxcfg.Routine
	spec         schedule.Spec // scheduled routines only
	next         time.Time     // the next wake; zero: none (an event routine)
}

func (t *routineTarget) scheduled() bool { return t.r.Schedule != "" }

func newRoutines(c *core, plan func(ctx context.Context, installation int64, repo *github.Repository, issue *github.Issue, trigger string) error) *Routines {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	rs := &Routines{c: c, holder: "bot-" + hex.EncodeToString(id), log: zerolog.Nop(),
		now: c.RoutinesNow, after: c.RoutinesAfterFunc, plan: plan}
	rs.cat = &routineCatalog{c: c, rs: rs, repos: map[string]*routineRepo{}, orgs: map[string]*orgFile{}}
	return rs
}

// Start reads every installed repository's routines and arms the
// scheduler; ctx lives as long as the scheduler (its logger is the
// scheduler's).
func (rs *Routines) Start(ctx context.Context) {
	rs.mu.Lock()
	rs.ctx, rs.log = ctx, *zerolog.Ctx(ctx)
	rs.mu.Unlock()
	if err := rs.cat.loadAll(ctx); err != nil {
		rs.log.Error().Err(err).Msg("routines: read the installed repositories' routines; a push to a default branch reads that one again")
	}
	rs.arm()
}

// Stop disarms the scheduler and waits for the ticks being acted on.
func (rs *Routines) Stop() {
	rs.mu.Lock()
	rs.stopped = true
	if rs.stop != nil {
		rs.stop()
	}
	rs.stop, rs.at = nil, time.Time{}
	rs.mu.Unlock()
	rs.fires.Wait()
}

// arm sets the timer for the earliest wake of every scheduled routine,
// unless the timer armed fires at that time already.
func (rs *Routines) arm() {
	earliest := rs.cat.earliest()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopped || rs.ctx == nil || earliest.Equal(rs.at) {
		return
	}
	if rs.stop != nil {
		rs.stop()
	}
	rs.stop, rs.at = nil, earliest
	if earliest.IsZero() {
		return
	}
	rs.stop = rs.after(max(earliest.Sub(rs.now()), 0), rs.wake)
}

// wake runs what is due and arms the timer for what comes next.
func (rs *Routines) wake() {
	rs.mu.Lock()
	ctx, stopped := rs.ctx, rs.stopped
	rs.stop, rs.at = nil, time.Time{}
	rs.mu.Unlock()
	if stopped {
		return
	}
	now := rs.now()
	for _, t := range rs.cat.due(now) {
		rs.runDue(ctx, t, now)
	}
	rs.arm()
}

// runDue claims t's due tick, if any, and acts on it; then sets its next
// wake. A routine seen for the first time gets the current minute as its
// baseline, and runs from the next tick on.
func (rs *Routines) runDue(ctx context.Context, t routineTarget, now time.Time) {
	full := t.repo.GetFullName()
	log := rs.log.With().Str("repo", full).Str("routine", t.r.Name).Logger()
	st, err := dispatch.ChangeRoutine(ctx, rs.c.Backend, full, t.r.Name, func(st *dispatch.RoutineState) error {
		if st.Tick != "" {
			return dispatch.ErrClaimed // nothing to set
		}
		st.Tick = t.spec.Now(now)
		return nil
	})
	if errors.Is(err, dispatch.ErrClaimed) {
		var book dispatch.RoutineBook
		book, err = dispatch.ReadRoutines(ctx, rs.c.Backend, full)
		st = book[t.r.Name]
	}
	if err != nil {
		log.Error().Err(err).Msg("routines: read the routine's book; it is looked at again in a minute")
		rs.cat.setNext(t, now.Add(time.Minute))
		return
	}
	last := st.Tick
	if tick, ok, _ := t.spec.Due(st.Tick, now); ok {
		last = tick
		if claimed, err := dispatch.ClaimTick(ctx, rs.c.Backend, full, t.r.Name, tick, rs.holder, now); err == nil {
			log.Info().Str("tick", tick).Time("due", now).Msg("routine tick claimed")
			rs.fire(ctx, t, "routine-"+t.r.Name+"-"+tick, claimed, false)
		} else if errors.Is(err, dispatch.ErrBusy) {
			log.Info().Str("tick", tick).Msg("routine skipped: its last tick is still being acted on")
		} else if !errors.Is(err, dispatch.ErrClaimed) {
			log.Error().Err(err).Str("tick", tick).Msg("routines: claim the tick")
		}
	}
	next, err := t.spec.NextWake(last, now)
	if err != nil {
		log.Error().Err(err).Msg("routines: the next tick")
	}
	rs.cat.setNext(t, next)
}

// fire acts on a claim on its own goroutine: the scheduler's wake does
// not wait on GitHub. always opens an issue even while the last one is
// open (/run).
func (rs *Routines) fire(ctx context.Context, t routineTarget, trigger string, st dispatch.RoutineState, always bool) {
	rs.fires.Add(1)
	go func() {
		defer rs.fires.Done()
		o := routineOpener{rs: rs, t: t, log: rs.log.With().Str("repo", t.repo.GetFullName()).Str("routine", t.r.Name).Str("trigger", trigger).Logger()}
		_, _ = o.run(ctx, trigger, st, always, "")
	}()
}

// RoutineView is what the dashboard and /status show of a routine.
type RoutineView struct {
	Repo, Name, Schedule, Timezone, On string
	// RepoID is the repository's id (who may see it on the dashboard).
	RepoID int64
	Next   time.Time
	// LastTick, LastAt, Issue and Result are from the routine's book.
	LastTick string
	LastAt   time.Time
	Issue    int
	Result   string
}

// List is the routines this replica knows, of repo or of every
// repository ("" ), with their next tick, last run and its result.
func (rs *Routines) List(ctx context.Context, repo string) []RoutineView {
	targets := rs.cat.list(repo)
	books := map[string]dispatch.RoutineBook{}
	var out []RoutineView
	for _, t := range targets {
		full := t.repo.GetFullName()
		book, ok := books[full]
		if !ok {
			book, _ = dispatch.ReadRoutines(ctx, rs.c.Backend, full)
			books[full] = book
		}
		st := book[t.r.Name]
		v := RoutineView{Repo: full, RepoID: t.repo.GetID(), Name: t.r.Name, Schedule: t.r.Schedule, Timezone: t.r.Timezone, On: t.r.On, Next: t.next,
			LastTick: st.Tick, Issue: st.Issue, Result: st.Result}
		if st.At > 0 {
			v.LastAt = time.UnixMilli(st.At)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b RoutineView) int {
		return strings.Compare(strings.ToLower(a.Repo+"\x00"+a.Name), strings.ToLower(b.Repo+"\x00"+b.Name))
	})
	return out
}

// added reads the routines of a repository the App was just installed on.
func (rs *Routines) added(ctx context.Context, installation int64, repo *github.Repository) {
	rs.mu.Lock()
	started := rs.ctx != nil
	rs.mu.Unlock()
	if !started {
		return // Start reads every repository
	}
	if err := rs.cat.load(ctx, installation, repo, ""); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("repo", repo.GetFullName()).Msg("routines: read the repository's routines")
	}
}
