// Package secretscan scans what the runner is about to push for secrets,
// with gitleaks v8 used as a library: its default rules (entropy-gated
// where gitleaks gates them), plus the run's own secret values, over the
// lines each commit adds. A finding carries the rule and the place, and
// never leaves this package with the matched text.
package secretscan

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gitleaks/go-gitdiff/gitdiff"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// Version names the scanner in receipts.
const Version = "gitleaks 8.30.1"

// RunSecretRule is the rule id of a value the run itself holds as a
// secret (its token, the secrets given to it) found in the change.
const RunSecretRule = "sandbox-run-secret"

// CommitMessage and CommitHeaders stand for the file of a finding in a
// commit's message, and in its headers (author, committer, and any other
// header the commit object carries).
const (
	CommitMessage = "(commit message)"
	CommitHeaders = "(commit headers)"
)

// Finding is one place a rule matched. Secret stays in memory: the runner
// compares it with the base to tell a new secret from an old one, and
// nothing of it is written anywhere.
type Finding struct {
	Rule        string
	Description string
	File        string
	Line        int
	Commit      string
	// Allowlist names the repository's allowlist that accepts it; empty
	// for a blocking finding.
	Allowlist string
	secret    string
	match     string
	line      string
	// inName says the secret is in the file's name (File is masked);
	// binary, in the printable text of a binary file (no Line).
	inName, binary bool
}

// Place is file:line, the way the receipt and the repair prompt say it.
func (f Finding) Place() string {
	switch {
	case f.inName:
		return f.File + " (in the file's name)"
	case f.binary:
		return f.File + " (text in a binary file)"
	case f.Line > 0:
		return fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	return f.File
}

// Result is one scan.
type Result struct {
	// Findings block the push; Allowed are accepted by an allowlist.
	Findings, Allowed []Finding
	// Commits scanned (0 for a plain diff), and their ids.
	Commits int
	SHAs    []string
	// Binary are files git showed as binary (a NUL in their first 8000
	// bytes, an attribute, or larger than TextBlobBytes): the caller
	// streams their content through ScanBlob.
	Binary []BinaryFile
	// Cut are the blobs and commits of which only the first MaxBlobBytes
	// were scanned.
	Cut []string
	// Bytes of added text scanned.
	Bytes int
}

// Merge adds another scan's findings and counts to r.
func (r *Result) Merge(o *Result) {
	r.Findings = append(r.Findings, o.Findings...)
	r.Allowed = append(r.Allowed, o.Allowed...)
	r.Commits += o.Commits
	r.SHAs = append(r.SHAs, o.SHAs...)
	r.Binary = append(r.Binary, o.Binary...)
	r.Cut = append(r.Cut, o.Cut...)
	r.Bytes += o.Bytes
}

// BinaryFile is a file a patch showed as binary.
type BinaryFile struct {
	Commit, Path string
}

// Scanner scans patches; one is made per run, on the first push.
type Scanner struct {
	// det runs every rule but the windowed ones over whole fragments;
	// win runs those over the lines their keywords are on.
	det, win *detect.Detector
	// winKeys are the windowed rules' keywords, lower case.
	winKeys []string
	known   []string
	allow   *Allowlist
	// named are the secrets found in file names so far this run: every
	// finding's File is masked with them, since a place that names the
	// file would otherwise publish the secret.
	mu    sync.Mutex
	named []string
}

// windowed are default rules whose keywords are common words of code
// ("key", "token", "auth", "ey", "s."), so that gitleaks' keyword
// prefilter passes nearly every file to their regular expressions, which
// then cost more than all the other rules together. Their matches lie on
// one line (or run over the next two, for "key =" and its value on
// another line), so they run only over each line holding a keyword and
// the two after it: the same findings, on a fraction of the text.
var windowed = []string{"generic-api-key", "jwt", "vault-service-token"}

// windowLines is how many lines after a keyword's line a window holds.
const windowLines = 2

// New makes a scanner with gitleaks' default rules, the run's own secret
// values (known) and the repository's allowlist (nil: none).
func New(known []string, allow *Allowlist) (*Scanner, error) {
	cfg, err := defaultRules()
	if err != nil {
		return nil, fmt.Errorf("secret scan: gitleaks' default rules: %w", err)
	}
	whole, win := cfg, cfg
	whole.Rules, win.Rules = map[string]config.Rule{}, map[string]config.Rule{}
	var winKeys []string
	for id, r := range cfg.Rules {
		if slices.Contains(windowed, id) && len(r.Keywords) > 0 {
			win.Rules[id] = r
			winKeys = append(winKeys, r.Keywords...)
		} else {
			whole.Rules[id] = r
		}
	}
	s := &Scanner{det: detector(whole), win: detector(win), winKeys: winKeys, allow: allow}
	for _, v := range known {
		if v = strings.TrimSpace(v); len(v) >= 8 {
			s.known = append(s.known, v)
		}
	}
	return s, nil
}

func detector(cfg config.Config) *detect.Detector {
	d := detect.NewDetector(cfg)
	// A "gitleaks:allow" comment is the agent's text: the change being
	// scanned cannot allowlist itself.
	d.IgnoreGitleaksAllow = true
	d.MaxDecodeDepth = 0
	return d
}

// defaultRules is gitleaks' default configuration, parsed once a process:
// parsing its TOML and compiling its rules and allowlists was most of the
// CPU of making a scanner, and what it holds is only read once parsed (New
// splits the rules into maps of its own; the detectors read the rest), so
// every scanner can share it.
var defaultRules = sync.OnceValues(defaultConfig)

// defaultConfig loads gitleaks' embedded default configuration on a viper
// instance of its own (gitleaks' NewDetectorDefaultConfig uses the global
// one).
func defaultConfig() (config.Config, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		return config.Config{}, err
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return config.Config{}, err
	}
	return vc.Translate()
}

// fragment is a run of added lines of one file in one commit (or a chunk
// of a blob, or a commit's headers or message).
type fragment struct {
	commit, path string
	raw          string
	start        int // line number of raw's first line
	// names are the file names raw holds, one a line: a finding on
	// line i is in names[i-start].
	names []string
	// binary says raw is the printable text of a binary file.
	binary bool
}

// namesPath is the path of a fragment of file names.
const namesPath = "(file names)"

// ScanPatch scans a patch: `git log -p -U0` output (every commit's added
// lines) or `git diff -U0` (the net change), as it is read: the detector
// works on one file while git writes the next. The names of the files
// the patch adds or changes are scanned too; commit messages and headers
// are ScanCommits'. Findings are sorted by place.
func (s *Scanner) ScanPatch(ctx context.Context, patch io.Reader) (*Result, error) {
	files, err := gitdiff.Parse(patch)
	if err != nil {
		return nil, fmt.Errorf("secret scan: read the patch: %w", err)
	}
	res := &Result{}
	// A few fragments of at most chunkBytes wait for the workers.
	frags := make(chan fragment, 8)
	found := s.scanAll(ctx, frags)
	names := fragment{path: namesPath, start: 1}
	flushNames := func() {
		if len(names.names) > 0 {
			names.raw = strings.Join(names.names, "\n") + "\n"
			frags <- names
		}
		names = fragment{path: namesPath, start: 1}
	}
	for f := range files {
		commit := ""
		if h := f.PatchHeader; h != nil {
			commit = h.SHA
		}
		if f.IsDelete {
			continue
		}
		if commit != names.commit || len(names.names) >= 4096 {
			flushNames()
			names.commit = commit
		}
		names.names = append(names.names, f.NewName)
		if f.IsBinary {
			res.Binary = append(res.Binary, BinaryFile{Commit: commit, Path: f.NewName})
			continue
		}
		for _, tf := range f.TextFragments {
			raw := tf.Raw(gitdiff.OpAdd)
			res.Bytes += len(raw)
			frag := fragment{commit: commit, path: f.NewName, raw: raw, start: int(tf.NewPosition)}
			switch {
			case raw == "":
			case len(raw) <= chunkBytes:
				frags <- frag
			default:
				c := newChunker(fragment{commit: commit, path: f.NewName, start: frag.start}, func(f fragment) { frags <- f })
				_, _ = io.WriteString(c, raw)
				_ = c.Close()
			}
		}
	}
	flushNames()
	close(frags)
	all := dedupe(found())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.sort(res, all)
	return res, nil
}

// Split puts findings into a result's blocking and allowed lists, sorted.
func (s *Scanner) Split(res *Result, found []Finding) { s.sort(res, found) }

func (s *Scanner) sort(res *Result, found []Finding) {
	for _, f := range found {
		// The allowlists see the real path; what leaves is masked.
		name := s.allow.accepts(f)
		f.File = s.MaskPath(f.File)
		if name != "" {
			f.Allowlist = name
			res.Allowed = append(res.Allowed, f)
		} else {
			res.Findings = append(res.Findings, f)
		}
	}
	for _, l := range [][]Finding{res.Findings, res.Allowed} {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].File != l[j].File {
				return l[i].File < l[j].File
			}
			if l[i].Line != l[j].Line {
				return l[i].Line < l[j].Line
			}
			return l[i].Rule < l[j].Rule
		})
	}
}

// MaskPath replaces in p every secret found in a file name so far, for
// anything that names the files of the change.
func (s *Scanner) MaskPath(p string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sec := range s.named {
		p = strings.ReplaceAll(p, sec, Redacted)
	}
	return p
}

// Redacted stands for a secret in a masked path.
const Redacted = "[REDACTED]"

// noteNamed remembers the secrets found in file names.
func (s *Scanner) noteNamed(fs []Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		if f.inName && f.secret != "" && !slices.Contains(s.named, f.secret) {
			s.named = append(s.named, f.secret)
		}
	}
	// Longest first, so that a secret holding another is masked whole.
	sort.Slice(s.named, func(i, j int) bool { return len(s.named[i]) > len(s.named[j]) })
}

// scan runs the detector over fragments on every CPU.
func (s *Scanner) scan(ctx context.Context, frags []fragment) []Finding {
	ch := make(chan fragment)
	found := s.scanAll(ctx, ch)
	for _, f := range frags {
		ch <- f
	}
	close(ch)
	return found()
}

// scanAll starts one worker per CPU on frags; the function it returns
// waits for them (after frags is closed) and gives what they found. A
// worker keeps draining frags after ctx ends, so the sender never blocks.
func (s *Scanner) scanAll(ctx context.Context, frags <-chan fragment) func() []Finding {
	var (
		mu    sync.Mutex
		found []Finding
		wg    sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range frags {
				if ctx.Err() != nil {
					continue
				}
				if got := s.scanOne(ctx, f); len(got) > 0 {
					mu.Lock()
					found = append(found, got...)
					mu.Unlock()
				}
			}
		}()
	}
	return func() []Finding {
		wg.Wait()
		return found
	}
}

func (s *Scanner) scanOne(ctx context.Context, f fragment) []Finding {
	var out []Finding
	for _, g := range s.det.DetectContext(ctx, detect.Fragment{Raw: f.raw, FilePath: f.path, CommitSHA: f.commit}) {
		out = append(out, fromGitleaks(g, f))
	}
	for _, w := range windows(f.raw, s.winKeys) {
		wf := fragment{commit: f.commit, path: f.path, raw: f.raw[w.from:w.to], start: f.start + w.line}
		for _, g := range s.win.DetectContext(ctx, detect.Fragment{Raw: wf.raw, FilePath: f.path, CommitSHA: f.commit}) {
			out = append(out, fromGitleaks(g, wf))
		}
	}
	out = preferSpecific(out)
	out = append(out, s.knownIn(f)...)
	if f.names != nil {
		out = inNames(out, f)
		s.noteNamed(out)
	}
	for i := range out {
		out[i].binary = f.binary
	}
	return out
}

// inNames turns findings on the lines of a fragment of file names into
// findings in those files' names.
func inNames(fs []Finding, f fragment) []Finding {
	for i := range fs {
		if n := fs[i].Line - f.start; n >= 0 && n < len(f.names) {
			fs[i].File = f.names[n]
		}
		fs[i].Line, fs[i].inName = 0, true
	}
	return fs
}

// knownIn finds the run's own secret values in f.
func (s *Scanner) knownIn(f fragment) []Finding {
	var out []Finding
	for _, k := range s.known {
		if i := strings.Index(f.raw, k); i >= 0 {
			line := strings.Count(f.raw[:i], "\n")
			out = append(out, Finding{Rule: RunSecretRule, Description: "A secret value given to this run", File: f.path,
				Line: f.start + line, Commit: f.commit, secret: k, match: k, line: lineAt(f.raw, i)})
		}
	}
	return out
}

func fromGitleaks(g report.Finding, f fragment) Finding {
	return Finding{Rule: g.RuleID, Description: g.Description, File: f.path, Line: f.start + g.StartLine,
		Commit: f.commit, secret: g.Secret, match: g.Match, line: g.Line}
}

func lineAt(s string, i int) string {
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return s[start:]
	}
	return s[start : i+end]
}

// looksBinary is git's own test: a NUL byte in the first 8000 bytes.
func looksBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// Places lists findings as "rule at file:line" for messages, never with
// the matched text.
func Places(fs []Finding, max int) string {
	var parts []string
	for i, f := range fs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(fs)-max))
			break
		}
		parts = append(parts, f.Rule+" at "+f.Place())
	}
	return strings.Join(parts, ", ")
}
