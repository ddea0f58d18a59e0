package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/schedule"
)

// Where routines come from: every repository of every installation, read
// at start, and again when its default branch moves (a push; the head in
// the event is what the cache is keyed by, so a push that leaves the
// branch where it was reads nothing) or when the organisation's .github
// repository's default branch moves (then every repository of the owner).
// A repository whose head did not move is not read again. Installation
// events read the repositories they add.

// routineCatalog is what this replica knows of every repository's
// routines.
type routineCatalog struct {
	c  *core
	rs *Routines

	mu    sync.Mutex
	repos map[string]*routineRepo // by lower-cased full name
	orgs  map[string]*orgFile     // by lower-cased owner
}

// routineRepo is one repository's routines as read at its head.
type routineRepo struct {
	installation int64
	repo         *github.Repository
	head, org    string // the heads its file and the organisation's were read at
	targets      []*routineTarget
}

// orgFile is an organisation's .github/.sandbox.yml routines at its head.
type orgFile struct {
	head string
	list sandboxcfg.Routines
	// at is when head was read: within orgFresh it is taken as it is, so
	// reading an organisation's thousand repositories reads its .github
	// once (a push to .github reads it again at once).
	at time.Time
}

const orgFresh = 10 * time.Minute

func repoKey(full string) string { return strings.ToLower(full) }

// loadAll reads the routines of every installed repository; repositories
// no longer installed are dropped.
func (cat *routineCatalog) loadAll(ctx context.Context) error {
	lister, ok := cat.c.Hub.(hub.Installations)
	if !ok {
		return errors.New("this GitHub seam cannot list installations")
	}
	ids, err := lister.Installations(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var firstErr error
	for _, id := range ids {
		repos, err := lister.InstallationRepos(ctx, id)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		for _, r := range repos {
			seen[repoKey(r.GetFullName())] = true
			if err := cat.load(ctx, id, r, ""); err != nil {
				cat.rs.log.Warn().Err(err).Str("repo", r.GetFullName()).Msg("routines: read the repository's routines")
			}
		}
	}
	cat.mu.Lock()
	if firstErr == nil {
		for k := range cat.repos {
			if !seen[k] {
				delete(cat.repos, k)
			}
		}
	}
	n := 0
	for _, rr := range cat.repos {
		n += len(rr.targets)
	}
	cat.mu.Unlock()
	cat.rs.log.Info().Int("repositories", len(seen)).Int("routines", n).Msg("routines read")
	return firstErr
}

// load reads repo's routines at head (its default branch's head when "")
// unless they were read there already, with its organisation's.
func (cat *routineCatalog) load(ctx context.Context, installation int64, repo *github.Repository, head string) error {
	gh, err := cat.c.Hub.Repo(installation, repo.GetFullName())
	if err != nil {
		return err
	}
	if repo.GetDefaultBranch() == "" {
		if repo, err = gh.Repository(ctx); err != nil {
			return err
		}
	}
	if head == "" {
		if head, _, err = gh.RefCommit(ctx, "heads/"+repo.GetDefaultBranch()); err != nil || head == "" {
			return cmp.Or(err, fmt.Errorf("%s has no branch %s", repo.GetFullName(), repo.GetDefaultBranch()))
		}
	}
	owner, name, _ := strings.Cut(repo.GetFullName(), "/")
	org, err := cat.orgRoutines(ctx, installation, owner, name == orgConfigRepo)
	if err != nil {
		return err
	}
	cat.mu.Lock()
	cur := cat.repos[repoKey(repo.GetFullName())]
	cat.mu.Unlock()
	if cur != nil && cur.head == head && cur.org == org.head {
		return nil
	}
	own, err := cat.readOwn(ctx, gh, head)
	if err != nil {
		return err
	}
	list := sandboxcfg.ForRepo(org.list, own, name)
	if name == orgConfigRepo {
		list = sandboxcfg.ForRepo(own, nil, name)
	}
	cat.set(&routineRepo{installation: installation, repo: repo, head: head, org: org.head}, list)
	return nil
}

// readOwn reads the repository's own routines at head and reports the
// bad entries on that commit.
func (cat *routineCatalog) readOwn(ctx context.Context, gh hub.GitHub, head string) (sandboxcfg.Routines, error) {
	f, err := gh.ConfigFile(ctx, head)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s at %.12s: %w", sandboxcfg.FileName, gh.FullName(), head, err)
	}
	if !f.Found {
		return nil, nil
	}
	own, errs := sandboxcfg.ParseRoutines(f.Path, f.Content)
	if len(errs) > 0 {
		if err := cat.c.reportRoutineErrors(ctx, gh, head, errs); err != nil {
			cat.rs.log.Warn().Err(err).Str("repo", gh.FullName()).Msg("routines: report the bad routines on their commit")
		}
	}
	return own, nil
}

// orgRoutines are owner's .github/.sandbox.yml routines at its default
// branch's head, read again when that moved. self: the .github
// repository itself is being read (its file is its own).
func (cat *routineCatalog) orgRoutines(ctx context.Context, installation int64, owner string, self bool) (orgFile, error) {
	if self {
		return orgFile{}, nil
	}
	now := cat.rs.now()
	cat.mu.Lock()
	cur, ok := cat.orgs[strings.ToLower(owner)]
	cat.mu.Unlock()
	if ok && now.Sub(cur.at) < orgFresh {
		return *cur, nil
	}
	gh, err := cat.c.Hub.Repo(installation, owner+"/"+orgConfigRepo)
	if err != nil {
		return orgFile{}, err
	}
	repo, err := gh.Repository(ctx)
	if errors.Is(err, hub.ErrNotFound) {
		cat.keepOrg(owner, orgFile{at: now})
		return orgFile{}, nil
	}
	if err != nil {
		return orgFile{}, err
	}
	head, _, err := gh.RefCommit(ctx, "heads/"+repo.GetDefaultBranch())
	if err != nil || head == "" {
		return orgFile{}, err
	}
	if ok && cur.head == head {
		cat.keepOrg(owner, orgFile{head: head, list: cur.list, at: now})
		return *cur, nil
	}
	f, err := gh.ConfigFile(ctx, head)
	if err != nil {
		return orgFile{}, err
	}
	out := orgFile{head: head, at: now}
	if f.Found {
		out.list, _ = sandboxcfg.ParseRoutines(f.Path, f.Content) // its bad entries are reported on its own commits
	}
	cat.keepOrg(owner, out)
	return out, nil
}

func (cat *routineCatalog) keepOrg(owner string, f orgFile) {
	cat.mu.Lock()
	cat.orgs[strings.ToLower(owner)] = &f
	cat.mu.Unlock()
}

// set replaces a repository's routines. A routine whose schedule did not
// change keeps its next wake; a new or changed one is looked at now (the
// scheduler sets its baseline, or runs its missed tick).
func (cat *routineCatalog) set(rr *routineRepo, list sandboxcfg.Routines) {
	now := cat.rs.now()
	cat.mu.Lock()
	old := cat.repos[repoKey(rr.repo.GetFullName())]
	for _, r := range list {
		t := &routineTarget{installation: rr.installation, repo: rr.repo, r: r}
		if r.Schedule != "" {
			c, _ := sandboxcfg.Cron(r.Schedule) // valid: ParseRoutines checked it
			loc, _ := r.Location()
			t.spec, t.next = schedule.New(c, loc), now
			if prev := old.find(r.Name); prev != nil && prev.r.Schedule == r.Schedule && prev.r.Timezone == r.Timezone {
				t.next = prev.next
			}
		}
		rr.targets = append(rr.targets, t)
	}
	cat.repos[repoKey(rr.repo.GetFullName())] = rr
	cat.mu.Unlock()
	cat.rs.arm()
}

func (rr *routineRepo) find(name string) *routineTarget {
	if rr == nil {
		return nil
	}
	for _, t := range rr.targets {
		if t.r.Name == name {
			return t
		}
	}
	return nil
}

// earliest is the first wake of every scheduled routine (zero: none).
func (cat *routineCatalog) earliest() time.Time {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	var first time.Time
	for _, rr := range cat.repos {
		for _, t := range rr.targets {
			if t.scheduled() && !t.next.IsZero() && (first.IsZero() || t.next.Before(first)) {
				first = t.next
			}
		}
	}
	return first
}

// due are the scheduled routines whose wake is at or before now.
func (cat *routineCatalog) due(now time.Time) []routineTarget {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	var out []routineTarget
	for _, rr := range cat.repos {
		for _, t := range rr.targets {
			if t.scheduled() && !t.next.IsZero() && !t.next.After(now) {
				out = append(out, *t)
			}
		}
	}
	return out
}

// setNext records t's next wake, if t is still what the repository
// declares.
func (cat *routineCatalog) setNext(t routineTarget, next time.Time) {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	if cur := cat.repos[repoKey(t.repo.GetFullName())].find(t.r.Name); cur != nil && cur.r.Schedule == t.r.Schedule {
		cur.next = next
	}
}

// find is repo's routine name.
func (cat *routineCatalog) find(repo, name string) (routineTarget, bool) {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	if t := cat.repos[repoKey(repo)].find(name); t != nil {
		return *t, true
	}
	return routineTarget{}, false
}

// list is a copy of repo's routines, or of every repository's.
func (cat *routineCatalog) list(repo string) []routineTarget {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	var out []routineTarget
	for k, rr := range cat.repos {
		if repo != "" && k != repoKey(repo) {
			continue
		}
		for _, t := range rr.targets {
			out = append(out, *t)
		}
	}
	return out
}

// pushed is a push to a repository's default branch: its routines are
// read at the new head; a push to the organisation's .github reads every
// repository of the owner again.
func (cat *routineCatalog) pushed(ctx context.Context, installation int64, repo *github.Repository, head string) error {
	owner, name, _ := strings.Cut(repo.GetFullName(), "/")
	if name == orgConfigRepo {
		cat.mu.Lock()
		delete(cat.orgs, strings.ToLower(owner)) // read it at its new head
		cat.mu.Unlock()
	}
	if err := cat.load(ctx, installation, repo, head); err != nil || name != orgConfigRepo {
		return err
	}
	var again []*routineRepo
	cat.mu.Lock()
	for _, rr := range cat.repos {
		if o, _, _ := strings.Cut(rr.repo.GetFullName(), "/"); strings.EqualFold(o, owner) {
			again = append(again, rr)
		}
	}
	cat.mu.Unlock()
	for _, rr := range again {
		if err := cat.load(ctx, rr.installation, rr.repo, rr.head); err != nil {
			cat.rs.log.Warn().Err(err).Str("repo", rr.repo.GetFullName()).Msg("routines: read the repository's routines again")
		}
	}
	return nil
}
