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

// CommitMessage stands for the file of a finding in a commit message.
const CommitMessage = "(commit message)"

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
}

// Place is file:line, the way the receipt and the repair prompt say it.
func (f Finding) Place() string {
	if f.Line > 0 {
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
	// Binary are files git showed as binary: the caller reads their
	// content and scans it with ScanContent when it is text after all (an
	// attribute marked it binary).
	Binary []BinaryFile
	// Bytes of added text scanned.
	Bytes int
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
	cfg, err := defaultConfig()
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

// fragment is a run of added lines of one file in one commit.
type fragment struct {
	commit, path string
	raw          string
	start        int // line number of raw's first line
}

// ScanPatch scans a patch: `git log -p -U0` output (every commit's added
// lines and its message) or `git diff -U0` (the net change), as it is
// read: the detector works on one file while git writes the next.
// Findings are sorted by place.
func (s *Scanner) ScanPatch(ctx context.Context, patch io.Reader) (*Result, error) {
	files, err := gitdiff.Parse(patch)
	if err != nil {
		return nil, fmt.Errorf("secret scan: read the patch: %w", err)
	}
	res := &Result{}
	frags := make(chan fragment, 64)
	found := s.scanAll(ctx, frags)
	seen := map[string]bool{}
	for f := range files {
		commit := ""
		if h := f.PatchHeader; h != nil {
			commit = h.SHA
			if commit != "" && !seen[commit] {
				seen[commit] = true
				res.Commits++
				res.SHAs = append(res.SHAs, commit)
				if msg := h.Message(); msg != "" {
					frags <- fragment{commit: commit, path: CommitMessage, raw: msg, start: 1}
				}
			}
		}
		switch {
		case f.IsDelete:
		case f.IsBinary:
			res.Binary = append(res.Binary, BinaryFile{Commit: commit, Path: f.NewName})
		default:
			for _, tf := range f.TextFragments {
				if raw := tf.Raw(gitdiff.OpAdd); raw != "" {
					res.Bytes += len(raw)
					frags <- fragment{commit: commit, path: f.NewName, raw: raw, start: int(tf.NewPosition)}
				}
			}
		}
	}
	close(frags)
	all := found()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.sort(res, all)
	return res, nil
}

// ScanContent scans a whole file (a binary-marked text file): every line
// counts as added.
func (s *Scanner) ScanContent(ctx context.Context, commit, path string, content []byte) []Finding {
	if looksBinary(content) {
		return nil
	}
	return s.scan(ctx, []fragment{{commit: commit, path: path, raw: string(content), start: 1}})
}

// Split puts findings into a result's blocking and allowed lists, sorted.
func (s *Scanner) Split(res *Result, found []Finding) { s.sort(res, found) }

func (s *Scanner) sort(res *Result, found []Finding) {
	for _, f := range found {
		if name := s.allow.accepts(f); name != "" {
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
	for _, k := range s.known {
		if i := strings.Index(f.raw, k); i >= 0 {
			line := strings.Count(f.raw[:i], "\n")
			out = append(out, Finding{Rule: RunSecretRule, Description: "A secret value given to this run", File: f.path,
				Line: f.start + line, Commit: f.commit, secret: k, match: k, line: lineAt(f.raw, i)})
		}
	}
	return out
}

// preferSpecific is gitleaks' own filter across its two detectors: a
// generic rule's finding on the line of a specific rule's finding that
// contains its secret is dropped.
func preferSpecific(fs []Finding) []Finding {
	generic := func(f Finding) bool { return strings.Contains(strings.ToLower(f.Rule), "generic") }
	all := slices.Clone(fs)
	return slices.DeleteFunc(fs, func(f Finding) bool {
		if !generic(f) {
			return false
		}
		for _, o := range all {
			if o.Line == f.Line && o.Commit == f.Commit && o.Rule != f.Rule && !generic(o) && strings.Contains(o.secret, f.secret) {
				return true
			}
		}
		return false
	})
}

// window is a byte range of a fragment starting at its line'th line (0-based).
type window struct{ from, to, line int }

// windows are the ranges of raw made of each line holding one of keys (in
// any case) and the windowLines lines after it, merged where they touch.
func windows(raw string, keys []string) []window {
	lower := strings.ToLower(raw)
	var starts []int // byte offset of each line
	hit := map[int]bool{}
	starts = append(starts, 0)
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\n' && i+1 < len(raw) {
			starts = append(starts, i+1)
		}
	}
	lineOf := func(off int) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
	}
	for _, k := range keys {
		for off := 0; ; {
			i := strings.Index(lower[off:], k)
			if i < 0 {
				break
			}
			l := lineOf(off + i)
			hit[l] = true
			off = starts[l] + 1
			if l+1 < len(starts) {
				off = starts[l+1]
			} else {
				break
			}
		}
	}
	if len(hit) == 0 {
		return nil
	}
	var out []window
	for l := 0; l < len(starts); l++ {
		if !hit[l] {
			continue
		}
		end := min(l+windowLines, len(starts)-1)
		for m := l + 1; m <= end; m++ {
			if hit[m] {
				end = min(m+windowLines, len(starts)-1)
			}
		}
		to := len(raw)
		if end+1 < len(starts) {
			to = starts[end+1]
		}
		out = append(out, window{from: starts[l], to: to, line: l})
		l = end
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

// Without drops the findings whose secret the old text holds too: a
// secret the base already had is not the change's (and pushing the
// change does not publish it anew).
func Without(found []Finding, old []byte) []Finding {
	if len(old) == 0 {
		return found
	}
	return slices.DeleteFunc(slices.Clone(found), func(f Finding) bool {
		return f.secret != "" && bytes.Contains(old, []byte(f.secret))
	})
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
