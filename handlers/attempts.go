package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/rank"
)

// Several attempts at one approved plan (/approve --attempts N, or
// attempts: in .sandbox.yml). The approval holds the issue's lock under
// its own task id (the set) and posts one acknowledgement naming every
// attempt; each attempt is an ordinary execute run started through begin
// (caps, queue, budget), with a lock of its own and the branch
// agent/<set>-a<k>. An attempt that ends leaves its run on the backend;
// when every attempt has ended (or could not start), the follower of the
// last one ranks them (rankAttempts), pushes the winner's commit to the
// PR's branch and opens the PR, then cleans every attempt up. What is in
// flight is the backend's run records (Meta.Set) and the bot's markers,
// so a restarted bot's followers finish it the same way.

// attemptLockKey is attempt k's own lock, beside the issue's.
func attemptLockKey(repo string, number, k int) string {
	return "attempt" + strconv.Itoa(k) + "/" + dispatch.LockKey(repo, number)
}

// setLockKey is held by the follower that ranks the attempts and opens
// the PR, so two attempts ending at once do not both do it.
func setLockKey(repo string, number int) string { return "attempts/" + dispatch.LockKey(repo, number) }

// attemptBranch is attempt k's branch.
func attemptBranch(set string, k int) string {
	return dispatch.BranchPrefix + strings.ToLower(set) + "-a" + strconv.Itoa(k)
}

// AttemptsStartedData is github/attempts_started: the approval's one
// acknowledgement.
type AttemptsStartedData struct {
	TaskID   string
	N        int
	Attempts []rank.Row
	Budget   float64
	Rule     string
	Marker   string
}

// AttemptNotStartedData is github/attempt_not_started.
type AttemptNotStartedData struct {
	K, N   int
	What   string
	Marker string
}

// AttemptsFailedData is github/attempts_failed: no attempt is one a PR
// can carry.
type AttemptsFailedData struct {
	Attempts string
	// Aborted: a person aborted the approval (/abort).
	Aborted bool
	Marker  string
}

// start starts the N attempts of the approved plan l: it takes
// the issue's lock for the approval, acknowledges once, and starts each
// attempt as its own run.
func (r *attemptSets) start(ctx context.Context, gh hub.GitHub, l launch) error {
	s := r.starts
	if acted, err := s.actedOn(ctx, gh, l); err != nil || acted {
		if err != nil {
			return l.kind.failed(ctx, gh, l, err, false)
		}
		return nil
	}
	ctx, log := withTask(ctx, l.taskID)
	if holder, err := s.takeLock(ctx, gh, l); err != nil {
		if errors.Is(err, dispatch.ErrLocked) {
			return l.kind.busy(ctx, gh, l, holder)
		}
		return l.kind.failed(ctx, gh, l, fmt.Errorf("lock %s: %w", l.lockKey, err), false)
	}
	n, reqs := l.cfg.NumAttempts(), []startRequest{}
	data := AttemptsStartedData{TaskID: l.taskID, N: n, Budget: l.cfg.MaxBudgetUSD, Rule: rank.Rule}
	for k := 1; k <= n; k++ {
		req := l.req
		req.Set, req.Variant, req.Variants, req.CommentID = l.taskID, k, n, 0
		req.Trigger = fmt.Sprintf("%s-a%d", l.req.Trigger, k)
		id := dispatch.NewTaskID(req.Repo.GetFullName(), req.Number, dispatch.ModeExecute, req.Trigger)
		data.Attempts = append(data.Attempts, rank.Row{K: k, TaskID: id, Branch: attemptBranch(l.taskID, k)})
		reqs = append(reqs, req)
	}
	data.Marker = markers.Marker{Kind: markers.KindAck, TaskID: l.taskID, Mode: dispatch.ModeExecute, Issue: l.req.Issue, Set: l.taskID, Variants: n,
		Attempts: data.Attempts}.String()
	s.c.react(ctx, gh, l.req.Number, l.req.CommentID, "eyes")
	labelErr := s.c.setState(ctx, gh, l.req.Number, lifecycle.Executing)
	if err := s.c.reply(ctx, gh, l.req.Number, "github/attempts_started", data); err != nil {
		s.c.unlock(ctx, l.lockKey, l.taskID)
		return l.kind.failed(ctx, gh, l, err, false)
	}
	log.Info().Int("attempts", n).Msg("starting the approval's attempts")
	for _, req := range reqs {
		if err := s.start(ctx, gh, req); err != nil {
			log.Error().Err(err).Int("attempt", req.Variant).Msg("start attempt")
		}
	}
	return labelErr
}

// attemptRun is the kind of one attempt: an execute run whose start is
// acknowledged by the approval's one comment, and whose failure to start
// is an ended attempt rather than a failed issue.
type attemptRun struct {
	agentRun
	sets *attemptSets
}

func (a attemptRun) announce(ctx context.Context, gh hub.GitHub, l launch, r built) error {
	zerolog.Ctx(ctx).Info().Str("branch", r.branch).Int("attempt", l.req.Variant).Msg("attempt submitted")
	return nil
}

// failed records that the attempt could not start (it ranks last) and
// settles the approval, which may have been waiting for it alone.
func (a attemptRun) failed(ctx context.Context, gh hub.GitHub, l launch, err error, locked bool) error {
	log := zerolog.Ctx(ctx)
	log.Error().Err(err).Int("attempt", l.req.Variant).Msg("attempt could not start")
	if ctx.Err() != nil {
		return err
	}
	what, _ := explainStartFailure(err, a.c.DispatchDeadline)
	if over, ok := asOverBudget(err); ok {
		what = fmt.Sprintf("its budget of $%.2f did not fit the $%.2f left of the %s's month (`/status` shows the budgets).", over.AskedUSD, over.LeftUSD, over.Scope)
	}
	if perr := a.c.reply(ctx, gh, l.req.Number, "github/attempt_not_started", AttemptNotStartedData{
		K: l.req.Variant, N: l.req.Variants, What: what,
		Marker: markers.Marker{Kind: markers.KindAttemptNotStarted, TaskID: l.taskID, Set: l.req.Set, Variant: l.req.Variant, Variants: l.req.Variants, Issue: l.req.Issue}.String(),
	}); perr != nil {
		return errors.Join(err, perr)
	}
	meta := dispatch.Meta{TaskID: l.taskID, Mode: dispatch.ModeExecute, Repo: l.req.Repo.GetFullName(), Number: l.req.Number,
		InstallationID: l.req.InstallationID, Set: l.req.Set, Variant: l.req.Variant, Variants: l.req.Variants}
	return a.sets.settleSet(ctx, gh, meta)
}

// attemptSets finishes approvals of several attempts: each attempt's
// end, and the approval's result once all have ended.
type attemptSets struct {
	c    *core
	keep *resultKeeper
	post *resultPoster
	// runs record who aborted an attempt.
	runs *follow.Runs
	// starts starts each attempt as a run of its own.
	starts *starter
}

// endAttempt is the end of one attempt's run: its check run and receipt,
// its lock, then the approval settled if it was the last.
func (r *attemptSets) endAttempt(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, res *dispatch.Result, prog *follow.Progress) {
	log := zerolog.Ctx(ctx)
	rc := &runContext{meta: meta, gh: gh, issue: meta.Number, branch: attemptBranch(meta.Set, meta.Variant)}
	rc.marked, _ = r.c.botMarked(ctx, gh, meta.Number)
	vetted := r.keep.vetResult(rc, res)
	r.keep.keepReceipt(ctx, rc, vetted)
	row := rank.RowOf(meta.Variant, meta.TaskID, rc.branch, vetted, "")
	conclusion := "success"
	if row.Out != "" || !row.ValidationPassed() {
		conclusion = "neutral"
	}
	prog.Attach(headOf(vetted))
	prog.Complete(ctx, conclusion, fmt.Sprintf("Attempt %d of %d: %s", meta.Variant, meta.Variants, row.Outcome()),
		"The approval's attempts are ranked once every one has ended; the pull request carries the best.", vetted)
	r.c.unlock(ctx, attemptLockKey(meta.Repo, meta.Number, meta.Variant), meta.TaskID)
	if err := untilPosted(ctx, log, r.c.ResultRetry, func() error { return r.settleSet(ctx, gh, meta) }); err != nil {
		log.Error().Err(err).Msg("settle the approval's attempts; a restart tries again")
		return
	}
	log.Info().Msg("attempt finished")
}

// setState is what the approval's attempts are: every attempt's run
// (by k), the ones that could not start, and whether its result is
// posted.
type setState struct {
	runs       map[int]dispatch.RunStatus
	notStarted map[int]string
	posted     bool
	marked     []markers.Comment
}

// readSet reads the approval meta.Set's attempts from the backend and
// the bot's markers.
func (r *attemptSets) readSet(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) (setState, error) {
	st := setState{runs: map[int]dispatch.RunStatus{}, notStarted: map[int]string{}}
	runs, err := r.c.Backend.List(ctx)
	if err != nil {
		return st, err
	}
	for _, run := range runs {
		if run.Meta.Set == meta.Set && run.Meta.Variant > 0 {
			st.runs[run.Meta.Variant] = run
		}
	}
	if st.marked, err = r.c.botMarked(ctx, gh, meta.Number); err != nil {
		return st, err
	}
	for _, m := range st.marked {
		switch {
		case m.Marker.Kind == markers.KindAttemptNotStarted && m.Marker.Set == meta.Set:
			st.notStarted[m.Marker.Variant] = "see the comment on the issue"
		case m.Marker.TaskID == meta.Set && (m.Marker.Kind == markers.KindResult || m.Marker.Kind == markers.KindFailure || m.Marker.Kind == markers.KindAborted):
			st.posted = true
		}
	}
	return st, nil
}

// ended reports whether every attempt has ended.
func (st setState) ended(n int) bool {
	for k := 1; k <= n; k++ {
		run, ok := st.runs[k]
		if st.notStarted[k] == "" && (!ok || !run.State.Ended()) {
			return false
		}
	}
	return true
}

// settleSet finishes the approval once every attempt has ended: ranks
// them, opens the PR with the winner (or says that none can be), cleans
// the attempts up and lets the issue go. Before that it does nothing; a
// result posted already (a restart) leaves only the cleanup.
func (r *attemptSets) settleSet(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) error {
	log := zerolog.Ctx(ctx).With().Str("set", meta.Set).Logger()
	st, err := r.readSet(ctx, gh, meta)
	if err != nil {
		return err
	}
	if !st.posted {
		if !st.ended(meta.Variants) {
			log.Info().Int("attempts", meta.Variants).Msg("attempts still in flight")
			return nil
		}
		key := setLockKey(meta.Repo, meta.Number)
		if _, err := r.c.Backend.Lock(ctx, key, meta.TaskID); errors.Is(err, dispatch.ErrLocked) {
			return nil // another attempt's follower settles it
		} else if err != nil {
			return err
		}
		defer r.c.unlock(ctx, key, meta.TaskID)
		if err := r.postSet(log.WithContext(ctx), gh, meta, st); err != nil {
			return err
		}
	}
	for _, run := range st.runs {
		if err := r.c.Backend.Cleanup(ctx, run.Meta.TaskID); err != nil {
			log.Warn().Err(err).Str("attempt", run.Meta.TaskID).Msg("clean up attempt")
		}
	}
	r.c.unlock(ctx, dispatch.LockKey(meta.Repo, meta.Number), meta.Set)
	log.Info().Msg("approval's attempts settled")
	return nil
}

// postSet ranks the ended attempts and posts the approval's result.
func (r *attemptSets) postSet(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, st setState) error {
	rows, results := make([]rank.Row, 0, meta.Variants), map[int]*dispatch.Result{}
	for k := 1; k <= meta.Variants; k++ {
		branch := attemptBranch(meta.Set, k)
		run, ok := st.runs[k]
		if !ok {
			rows = append(rows, rank.RowOf(k, "", branch, nil, st.notStarted[k]))
			continue
		}
		res, err := r.c.Backend.Result(ctx, run.Meta.TaskID)
		if errors.Is(err, dispatch.ErrBadResult) {
			res = rejectedResult(run.Meta, rejectedMessage)
		} else if err != nil {
			res = nil
		}
		rc := &runContext{meta: run.Meta, gh: gh, issue: meta.Number, branch: branch, marked: st.marked}
		res = r.keep.vetResult(rc, res)
		row := rank.RowOf(k, run.Meta.TaskID, branch, res, "")
		if _, aborted := r.keep.runs.AbortedBy(run.Meta.TaskID); aborted {
			row.Out = "aborted"
		} else if _, marked := markers.Last(st.marked, markers.KindAbortRequested, meta.Set); marked {
			row.Out = "aborted"
		}
		rows, results[k] = append(rows, row), res
	}
	repo, err := gh.Repository(ctx)
	if err != nil {
		return err
	}
	base := repo.GetDefaultBranch()
	win := rank.Attempts(rows)[0]
	zerolog.Ctx(ctx).Info().Int("winner", win.K).Str("outcome", win.Outcome()).Msg("attempts ranked")
	if win.Out != "" {
		section, err := r.renderAttempts(meta.Repo, base, meta.Set, rows, 0, "")
		if err != nil {
			return err
		}
		_, aborted := markers.Last(st.marked, markers.KindAbortRequested, meta.Set)
		kind, state := markers.KindFailure, lifecycle.Failed
		if aborted {
			kind, state = markers.KindAborted, lifecycle.Aborted
		}
		return errors.Join(r.c.setState(ctx, gh, meta.Number, state), r.c.reply(ctx, gh, meta.Number, "github/attempts_failed", AttemptsFailedData{
			Attempts: section, Aborted: aborted, Marker: markers.Marker{Kind: kind, TaskID: meta.Set, Mode: dispatch.ModeExecute, Issue: meta.Number}.String(),
		}))
	}
	return r.openSetPR(ctx, gh, meta, base, rows, win, results[win.K], st.marked)
}

// openSetPR points the PR's branch at the winner's commit and opens the
// PR with the winner's receipt and the table of attempts.
func (r *attemptSets) openSetPR(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, base string, rows []rank.Row, win rank.Row, res *dispatch.Result, marked []markers.Comment) error {
	issue, err := gh.Issue(ctx, meta.Number)
	if err != nil {
		return err
	}
	prBranch := dispatch.BranchName(meta.Set, issue.GetTitle())
	if err := pointBranch(ctx, gh, prBranch, win.Head); err != nil {
		return err
	}
	section, err := r.renderAttempts(meta.Repo, base, meta.Set, rows, win.K, "")
	if err != nil {
		return err
	}
	carried := *res
	carried.TaskID, carried.Branch = meta.Set, prBranch
	wm := setMeta(meta, win)
	rc := &runContext{meta: wm, gh: gh, issue: meta.Number, branch: prBranch, marked: marked, attempts: section}
	return r.post.openPR(ctx, rc, &carried, r.post.runs.Progress(ctx, gh, wm), lifecycle.Done)
}

// setMeta is the approval's own meta, carried by the winner: the PR's
// receipt is the approval's.
func setMeta(meta dispatch.Meta, win rank.Row) dispatch.Meta {
	m := meta
	m.TaskID, m.HeadSHA, m.Variant = meta.Set, win.Head, win.K
	m.Attempt = max(m.Attempt, 1)
	return m
}

// pointBranch makes branch (the bot's own) point at sha: created, or
// moved when a restart created it already.
func pointBranch(ctx context.Context, gh hub.GitHub, branch, sha string) error {
	ref := "refs/heads/" + branch
	err := gh.CreateRef(ctx, ref, sha)
	if err == nil || !errors.Is(err, hub.ErrExists) {
		return err
	}
	if cur, _, err := gh.RefCommit(ctx, ref); err == nil && strings.EqualFold(cur, sha) {
		return nil
	}
	return gh.UpdateRef(ctx, ref, sha)
}

// The PR body's attempts section sits between these, so /pick replaces
// it; its marker keeps the rows.
const (
	attemptsStart = "<!-- sandbox-bot:attempts-start -->"
	attemptsEnd   = "<!-- sandbox-bot:attempts-end -->"
)

// AttemptsData is github/pr_attempts: the table of attempts.
type AttemptsData struct {
	Rows []AttemptView
	// Carried is the attempt the PR's branch carries; Best the checks'
	// pick; By who picked Carried when it is not Best.
	Carried, Best int
	By            string
	Rule          string
	// CostUSD is what every attempt cost together.
	CostUSD float64
	Marker  string
}

// AttemptView is a row with its place and links.
type AttemptView struct {
	rank.Row
	Rank    int
	Compare string
	RunURL  string
}

// renderAttempts is the attempts section with its markers; carried is
// the attempt on the PR's branch (0: none), by who picked it.
func (r *attemptSets) renderAttempts(repo, base, set string, rows []rank.Row, carried int, by string) (string, error) {
	ranked := rank.Attempts(rows)
	data := AttemptsData{Carried: carried, Best: ranked[0].K, By: by, Rule: rank.Rule,
		Marker: markers.Marker{Kind: markers.KindAttempts, TaskID: set, Attempts: rows, Picked: carried, By: by, Branch: base}.String()}
	web := strings.TrimSuffix(r.c.WebURL, "/")
	for _, row := range rows {
		data.CostUSD += row.CostUSD
		v := AttemptView{Row: row, Rank: slices.IndexFunc(ranked, func(x rank.Row) bool { return x.K == row.K }) + 1}
		if row.Head != "" {
			v.Compare = fmt.Sprintf("%s/%s/compare/%s...%s", web, repo, base, row.Branch)
		}
		if row.TaskID != "" {
			v.RunURL = r.c.Receipts.RunURL(row.TaskID)
		}
		data.Rows = append(data.Rows, v)
	}
	text, err := r.c.Templates.Render("github/pr_attempts", data)
	if err != nil {
		return "", err
	}
	return attemptsStart + "\n" + strings.TrimSpace(text) + "\n" + attemptsEnd, nil
}

// spliceAttempts puts section in place of the body's attempts section.
func spliceAttempts(body, section string) (string, bool) {
	before, rest, ok := strings.Cut(body, attemptsStart)
	if !ok {
		return body, false
	}
	_, after, ok := strings.Cut(rest, attemptsEnd)
	return before + section + after, ok
}

// attemptsOf is the attempts marker of a PR body, if it has one.
func attemptsOf(body string) (markers.Marker, bool) {
	_, rest, ok := strings.Cut(body, attemptsStart)
	if !ok {
		return markers.Marker{}, false
	}
	inner, _, ok := strings.Cut(rest, attemptsEnd)
	if !ok {
		return markers.Marker{}, false
	}
	m, ok := markers.Parse(inner)
	return m, ok && m.Kind == markers.KindAttempts
}

// abort stops an approval's attempts (/abort while holder, the approval,
// holds the issue): the waiting ones leave the queue (ended: not
// started), the running ones are cancelled and rank as aborted; the
// approval then ends without a PR. handled=false when holder is no
// approval of several attempts.
func (r *attemptSets) abort(ctx context.Context, t thread, holder string) (handled bool, err error) {
	marked, err := r.c.botMarked(ctx, t.gh, t.number)
	if err != nil {
		return false, err
	}
	ack, ok := markers.Last(marked, markers.KindAck, holder)
	if !ok || ack.Marker.Set != holder {
		return false, nil
	}
	r.c.react(ctx, t.gh, t.number, t.commentID, "+1")
	if err := r.c.reply(ctx, t.gh, t.number, "github/abort_requested", AbortRequestedData{
		Marker: markers.Marker{Kind: markers.KindAbortRequested, TaskID: holder}.String(), TaskID: holder, By: t.sender,
	}); err != nil {
		return true, err
	}
	n := ack.Marker.Variants
	meta := dispatch.Meta{TaskID: holder, Mode: dispatch.ModeExecute, Repo: t.gh.FullName(), Number: t.number, InstallationID: t.installation, Set: holder, Variants: n}
	st, err := r.readSet(ctx, t.gh, meta)
	if err != nil {
		return true, err
	}
	// The waiting attempts leave the queue first: a running one cancelled
	// before them frees its slot, and the queue would start the next.
	dequeued := map[int]bool{}
	for _, row := range ack.Marker.Attempts {
		if run, ok := st.runs[row.K]; ok && run.State.Ended() {
			continue
		}
		removed, err := dispatch.DequeueWaiting(ctx, r.c.Backend, row.TaskID)
		if err != nil {
			return true, err
		}
		dequeued[row.K] = removed
	}
	for _, row := range ack.Marker.Attempts {
		if run, ok := st.runs[row.K]; ok && run.State.Ended() {
			r.runs.MarkAborted(row.TaskID, t.sender) // it ranks as aborted with the rest
			continue
		}
		removed := dequeued[row.K]
		what := "@" + t.sender + " aborted it while it waited in the queue."
		if !removed {
			r.runs.MarkAborted(row.TaskID, t.sender)
			err := r.c.Backend.Cancel(ctx, row.TaskID)
			if err == nil || !errors.Is(err, dispatch.ErrNotFound) {
				if err != nil {
					return true, fmt.Errorf("cancel attempt %d (%s): %w", row.K, row.TaskID, err)
				}
				continue
			}
			if _, ended := st.notStarted[row.K]; ended {
				continue
			}
			// Neither waiting nor on the backend: it never started (a bot
			// stopped while starting the attempts); /abort ends it.
			what = "it never started, and @" + t.sender + " aborted the attempts."
		}
		if err := r.c.Backend.DropQueued(ctx, row.TaskID); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("drop an aborted attempt's queued request")
		}
		r.c.unlock(ctx, attemptLockKey(meta.Repo, meta.Number, row.K), row.TaskID)
		if err := r.c.reply(ctx, t.gh, t.number, "github/attempt_not_started", AttemptNotStartedData{K: row.K, N: n, What: what,
			Marker: markers.Marker{Kind: markers.KindAttemptNotStarted, TaskID: row.TaskID, Set: holder, Variant: row.K, Variants: n, Issue: t.number}.String()}); err != nil {
			return true, err
		}
	}
	// Settled here when no attempt is left to end (all were waiting).
	return true, r.settleSet(ctx, t.gh, meta)
}

// dropBranches deletes the attempts' own branches of the approval whose
// PR d closed (merged or not); the PR's branch is left to GitHub's
// setting. A PR that is not the App's, or no approval's, is left alone.
func (r *attemptSets) dropBranches(ctx context.Context, d Delivery) error {
	pr := d.PR
	login, err := r.c.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	if _, ours := markers.IsAgentPR(pr, login); !ours {
		return nil
	}
	m, ok := attemptsOf(pr.GetBody())
	if !ok {
		return nil
	}
	gh, err := r.c.Hub.Repo(d.Installation, d.Repo.GetFullName())
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx).With().Str("delivery_id", d.ID).Str("repo", d.Repo.GetFullName()).Int("pr", pr.GetNumber()).Str("set", m.TaskID).Logger()
	// The names come from the approval's id, never from the body's text:
	// only the bot's own attempt branches can go.
	for _, row := range m.Attempts {
		branch := attemptBranch(m.TaskID, row.K)
		if branch == pr.GetHead().GetRef() {
			continue
		}
		if err := gh.DeleteRef(ctx, "refs/heads/"+branch); err != nil {
			log.Warn().Err(err).Str("branch", branch).Msg("delete an attempt's branch")
			continue
		}
		log.Info().Str("branch", branch).Bool("merged", pr.GetMerged()).Msg("deleted an attempt's branch: its PR is closed")
	}
	return nil
}
