package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/secretscan"
)

// The secret scan stands before every push (checkpoints, milestones, the
// final push, the media commit, a rebase's force push): the commits about
// to be pushed are scanned, and a finding holds the push back. When a
// repair has removed what was found, the unpushed commits are rewritten
// into one, whose content is the clean net change, so that the secret is
// not published in the history either. Runs that push nothing (plan, task)
// never make a scanner.

// secretGate is the scan, a value of its own: built once the checkout
// knows its base, from what it needs (the runner's mirror, the base commit
// whose allowlists it reads, the run's secrets through the redactor), and
// asked at each push what may go.
type secretGate struct {
	git     *Git
	baseSHA string
	// allow are .sandbox.yml's secrets.allow entries.
	allow []sandboxcfg.SecretAllow
	red   *Redactor
	log   zerolog.Logger
	prog  *reporter
	// subject and taskID make the message of a squashed commit.
	subject, taskID string

	scanner *secretscan.Scanner
	// scanned are the commits scanned over the run (a held commit is
	// scanned again at each push it holds back, and counted once).
	scanned map[string]bool
	// held are the blocking findings of the last scan (nil: the last
	// push went through); allowed, every allowlisted one seen.
	held     []secretscan.Finding
	allowed  map[string]secretscan.Finding
	repaired map[string]bool
	squashed int
	// cut are the files and commits larger than the scan's bound, of
	// which only the first secretscan.MaxBlobBytes were scanned.
	cut map[string]bool
}

func newSecretGate(git *Git, baseSHA string, allow []sandboxcfg.SecretAllow, red *Redactor, log zerolog.Logger, prog *reporter, subject, taskID string) *secretGate {
	return &secretGate{git: git, baseSHA: baseSHA, allow: allow, red: red, log: log, prog: prog, subject: subject, taskID: taskID}
}

// errHeld is a push the secret scan held back.
type errHeld struct{ findings []secretscan.Finding }

func (e *errHeld) Error() string {
	return fmt.Sprintf("the secret scan found %d secret(s) in the commits to push, so nothing of them was pushed: %s",
		len(e.findings), secretscan.Places(e.findings, 10))
}

// gatePush scans what pushing head would publish, beyond the last push
// (pushed, "" for none), and returns the commit to push: head, or the one
// commit the clean net change was squashed into. A finding still in the
// net change is an *errHeld.
func (g *secretGate) gatePush(ctx context.Context, head, pushed string) (string, error) {
	s, err := g.secretScanner(ctx)
	if err != nil {
		return "", err
	}
	res, err := g.scanCommits(ctx, s, head, pushed)
	if err != nil {
		return "", err
	}
	for _, sha := range res.SHAs {
		g.scanned[sha] = true
	}
	g.noteCut(s, res)
	g.noteAllowed(res.Allowed)
	if len(res.Findings) == 0 {
		g.held = nil
		return head, nil
	}
	from := g.squashBase(ctx, head, pushed)
	net, err := g.scanNet(ctx, s, from, head)
	if err != nil {
		return "", err
	}
	g.noteCut(s, net)
	if len(net.Findings) > 0 {
		g.held = net.Findings
		g.log.Warn().Str("findings", secretscan.Places(net.Findings, 10)).Msg("secret scan: push held")
		g.prog.emit(dispatch.Progress{Stage: "push", Message: fmt.Sprintf("push held: %d secret finding(s)", len(net.Findings))})
		return "", &errHeld{findings: net.Findings}
	}
	squashed, err := g.squash(ctx, from, head)
	if err != nil {
		return "", err
	}
	for _, f := range res.Findings {
		g.repaired[f.Rule+" "+f.Place()] = true
	}
	g.held = nil
	return squashed, nil
}

// secretScanner makes the run's scanner on first use, with the
// repository's allowlists read from the base commit in the runner's
// mirror (the agent's change cannot add one).
func (g *secretGate) secretScanner(ctx context.Context) (*secretscan.Scanner, error) {
	if g.scanner != nil {
		return g.scanner, nil
	}
	files, err := g.git.Blobs(ctx, g.baseSHA+":"+secretscan.IgnoreFile, g.baseSHA+":"+secretscan.ConfigFile)
	if err != nil {
		// Scanned without the repository's allowlists: stricter, not blind.
		g.log.Warn().Err(err).Msg("secret scan: could not read the base's allowlists")
		files = make([][]byte, 2)
	}
	allow, err := secretscan.LoadAllowlist(files[0], files[1], g.allow)
	if err != nil {
		g.log.Warn().Err(err).Msg("secret scan: the repository's gitleaks configuration is not used")
	}
	s, err := secretscan.New(g.red.Values(), allow)
	if err != nil {
		return nil, err
	}
	g.scanner = s
	g.allowed = map[string]secretscan.Finding{}
	g.scanned = map[string]bool{}
	g.repaired = map[string]bool{}
	g.cut = map[string]bool{}
	return s, nil
}

// scanCommits scans every commit reachable from head that the remote
// branch and the base do not have: each commit's added lines and file
// names, then each commit object (headers and message).
func (g *secretGate) scanCommits(ctx context.Context, s *secretscan.Scanner, head, pushed string) (*secretscan.Result, error) {
	rng := []string{head, "--not", g.baseSHA}
	if pushed != "" {
		rng = append(rng, pushed)
	}
	res, err := g.scanPatch(ctx, s, append(append([]string{"log"}, patchArgs...), rng...), "")
	if err != nil {
		return nil, err
	}
	shas, err := g.git.Inspect(ctx, append([]string{"rev-list"}, rng...)...)
	if err != nil {
		return nil, fmt.Errorf("secret scan: list the commits: %w", err)
	}
	if strings.TrimSpace(shas) == "" {
		return res, nil
	}
	var commits *secretscan.Result
	err = g.git.InspectStreamIn(ctx, strings.NewReader(shas), func(out io.Reader) error {
		commits, err = s.ScanCommits(ctx, out)
		return err
	}, "cat-file", "--batch")
	if err != nil {
		return nil, fmt.Errorf("secret scan: %w", err)
	}
	res.Merge(commits)
	return res, nil
}

// scanNet scans the net change from..head as one diff.
func (g *secretGate) scanNet(ctx context.Context, s *secretscan.Scanner, from, head string) (*secretscan.Result, error) {
	return g.scanPatch(ctx, s, append(append([]string{"diff"}, patchArgs[:len(patchArgs)-1]...), from, head), from)
}

// patchArgs make a patch the scanner reads, whatever the configuration:
// added lines only, no external diff or text conversion, plain prefixes,
// git's own header format (the last one, for log only).
var patchArgs = []string{"-p", "-U0", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--no-relative",
	"--src-prefix=a/", "--dst-prefix=b/", "--pretty=medium"}

// scanPatch scans the patch git prints for args, then the files it showed
// as binary. A file larger than secretscan.TextBlobBytes is shown as
// binary too (core.bigFileThreshold), so no fragment of the patch is
// larger, and it is streamed from its blob like the others. from is the
// old side of a plain diff (empty for a log, whose commits have parents).
func (g *secretGate) scanPatch(ctx context.Context, s *secretscan.Scanner, args []string, from string) (*secretscan.Result, error) {
	var res *secretscan.Result
	big := fmt.Sprintf("core.bigFileThreshold=%d", secretscan.TextBlobBytes)
	err := g.git.InspectStream(ctx, func(out io.Reader) error {
		var err error
		res, err = s.ScanPatch(ctx, out)
		return err
	}, append([]string{"-c", big}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("secret scan: %w", err)
	}
	head := args[len(args)-1]
	if from == "" {
		head = ""
	}
	g.scanBinaries(ctx, s, res, from, head)
	return res, nil
}

// scanBinaries streams the files git showed as binary through the
// scanner (their text; the printable runs of a binary-looking one), less
// what the file held before: in its commit's parent, or at from for a
// plain diff from..head.
func (g *secretGate) scanBinaries(ctx context.Context, s *secretscan.Scanner, res *secretscan.Result, from, head string) {
	var found []secretscan.Finding
	for _, b := range res.Binary {
		rev, old := head, from
		if b.Commit != "" {
			rev, old = b.Commit, b.Commit+"^"
		}
		var got []secretscan.Finding
		var st secretscan.BlobScan
		err := g.git.InspectStream(ctx, func(out io.Reader) error {
			var err error
			got, st, err = s.ScanBlob(ctx, b.Commit, b.Path, out)
			return err
		}, "cat-file", "blob", rev+":"+b.Path)
		if err != nil {
			g.log.Warn().Err(err).Str("file", s.MaskPath(b.Path)).Msg("secret scan: could not read a binary file")
			continue
		}
		if st.Cut {
			res.Cut = append(res.Cut, b.Path)
		}
		if len(got) > 0 && old != "" {
			// A file new in this change has no old side: cat-file fails
			// and every finding stays.
			_ = g.git.InspectStream(ctx, func(out io.Reader) error {
				kept, err := secretscan.WithoutIn(got, out)
				got = kept
				return err
			}, "cat-file", "blob", old+":"+b.Path)
		}
		found = append(found, got...)
	}
	if len(found) > 0 {
		extra := &secretscan.Result{}
		s.Split(extra, found)
		res.Findings = append(res.Findings, extra.Findings...)
		res.Allowed = append(res.Allowed, extra.Allowed...)
	}
}

// squashBase is the commit the unpushed work sits on: the last push when
// head descends from it, else the base.
func (g *secretGate) squashBase(ctx context.Context, head, pushed string) string {
	if pushed != "" {
		if ok, _ := g.git.IsAncestor(ctx, pushed, head); ok {
			return pushed
		}
	}
	return g.baseSHA
}

// squash rewrites from..head into one commit of head's tree. Its message
// is the runner's own: the agent's messages may hold what was found.
func (g *secretGate) squash(ctx context.Context, from, head string) (string, error) {
	n, err := g.git.run(ctx, "", "rev-list", "--count", from+".."+head)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("%s\n\nThe sandbox's secret scan held back %s commit(s) until a repair removed what it found; they are\nrewritten into this one so that nothing of them is published.\n\nTask: %s",
		g.subject, n, g.taskID)
	if _, err := g.git.run(ctx, "", "reset", "--soft", from); err != nil {
		return "", err
	}
	if _, err := g.git.run(ctx, "", "commit", "--quiet", "--no-verify", "--allow-empty", "-m", g.red.String(msg)); err != nil {
		return "", err
	}
	sha, err := g.git.Head(ctx)
	if err != nil {
		return "", err
	}
	g.squashed++
	g.log.Info().Str("from", from).Str("sha", sha).Str("commits", n).Msg("secret scan: unpushed commits squashed after the repair")
	return sha, nil
}

// noteCut remembers what was too large to scan whole, and says so in the
// log (masked: a file's name may hold what the scan found).
func (g *secretGate) noteCut(s *secretscan.Scanner, res *secretscan.Result) {
	for _, c := range res.Cut {
		c = s.MaskPath(c)
		if !g.cut[c] {
			g.cut[c] = true
			g.log.Warn().Str("file", c).Int("scanned_bytes", secretscan.MaxBlobBytes).Msg("secret scan: larger than its bound; only its first part was scanned")
		}
	}
}

func (g *secretGate) noteAllowed(fs []secretscan.Finding) {
	for _, f := range fs {
		g.allowed[f.Rule+" "+f.Place()] = f
	}
}

// secretsCheck is the built-in check, from the push the run made (or the
// scan it made instead) just now: err is what that returned.
func secretsCheck(err error, red *Redactor) checkRun {
	c := checkRun{Check: builtinCheck(dispatch.CheckSecrets, "the secret scan of the commits to push ("+secretscan.Version+")"), Passed: true}
	var held *errHeld
	switch {
	case errors.As(err, &held):
		c.Passed = false
		var b strings.Builder
		fmt.Fprintf(&b, "The secret scan (%s: its default rules, and the values this run holds as secrets) found these in your change; nothing of it was pushed:\n", secretscan.Version)
		for _, f := range held.findings {
			fmt.Fprintf(&b, "- %s (%s) at %s\n", f.Rule, f.Description, f.Place())
		}
		b.WriteString("Remove them from the files: read such values from the environment or configuration at run time, and never commit a credential, a real or a made-up one shaped like one (use an obvious placeholder such as EXAMPLE). The sandbox rewrites its unpushed commits once the change is clean, so they never reach the branch's history.")
		c.Tail = b.String()
	case err != nil:
		c.Passed = false
		c.Tail = red.String("The push failed: " + err.Error())
	}
	return c
}

// secretReport is the receipt's account of the scan, nil when nothing was
// scanned (a run that pushed nothing).
func (g *secretGate) report() *dispatch.SecretScan {
	if g == nil || g.scanner == nil {
		return nil
	}
	scanner := secretscan.Version + " (default rules with their entropy thresholds) and the run's own secrets"
	if n := len(g.cut); n > 0 {
		scanner += fmt.Sprintf("; %d file(s) or commit(s) larger than %d MiB scanned in their first %d MiB only", n, secretscan.MaxBlobBytes>>20, secretscan.MaxBlobBytes>>20)
	}
	rep := &dispatch.SecretScan{Scanner: scanner, Commits: len(g.scanned), Squashed: g.squashed}
	for _, f := range g.held {
		rep.Findings = append(rep.Findings, secretFinding(f))
		delete(g.repaired, f.Rule+" "+f.Place())
	}
	rep.Repaired = len(g.repaired)
	for _, f := range g.allowed {
		rep.Allowed = append(rep.Allowed, secretFinding(f))
	}
	sortSecretFindings(rep.Allowed)
	return rep
}

// heldBack reports whether the last scan held a push back; false before
// any checkout.
func (g *secretGate) heldBack() bool { return g != nil && g.held != nil }

// masked is path as every list of the change's files shows it: with what
// the scan found in a file's name masked.
func (g *secretGate) masked(path string) string {
	if g == nil || g.scanner == nil {
		return path
	}
	return g.scanner.MaskPath(path)
}

func secretFinding(f secretscan.Finding) dispatch.SecretFinding {
	return dispatch.SecretFinding{Rule: f.Rule, Description: f.Description, File: f.File, Line: f.Line, Commit: f.Commit, Allowlist: f.Allowlist}
}
