package secretscan_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/secretscan"
)

// Fake credentials shaped like real ones (no real key is ever in a test).
const (
	awsKey   = "AKIAZ7XQ3MRT5LW2KVNB"
	hiToken  = "9f8Kq2LmX7vB4nR1tY6wZ3pJ0sD5hG8c"
	runValue = "run-secret-value-0123456789"
)

// repo is a real git repository in a temp dir.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit("base", map[string]string{"README.md": "# demo\n"})
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	return gitB(r.t, r.dir, args...)
}

// gitB runs git in dir with a fixed identity and no user configuration.
func gitB(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := gitCmd(dir, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitCmd is git in dir with a fixed identity and no user configuration.
func gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	return cmd
}

func runGit(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if _, err := cmd.Output(); err != nil {
		tb.Fatalf("git %v: %v", args, err)
	}
}

func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func (r *repo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	writeFiles(r.t, r.dir, files)
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func (r *repo) log(from string) string {
	return r.git("log", "-p", "-U0", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--pretty=medium", "HEAD", "--not", from)
}

func scan(t *testing.T, s *secretscan.Scanner, patch string) *secretscan.Result {
	t.Helper()
	res, err := s.ScanPatch(context.Background(), strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// scanPush scans what pushing HEAD would publish over from, as the runner
// does: the patch of every commit, then every commit object.
func (r *repo) scanPush(s *secretscan.Scanner, from string) *secretscan.Result {
	r.t.Helper()
	res := scan(r.t, s, r.log(from))
	commits, err := s.ScanCommits(context.Background(), strings.NewReader(r.batch(from)))
	if err != nil {
		r.t.Fatal(err)
	}
	res.Merge(commits)
	return res
}

// batch is `git cat-file --batch` of the commits HEAD has and from lacks.
func (r *repo) batch(from string) string {
	r.t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = r.dir
	cmd.Stdin = strings.NewReader(r.git("rev-list", "HEAD", "--not", from) + "\n")
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatal(err)
	}
	return string(out)
}

// blob scans content as a file of commit c.
func blob(t *testing.T, s *secretscan.Scanner, path, content string) ([]secretscan.Finding, secretscan.BlobScan) {
	t.Helper()
	got, st, err := s.ScanBlob(context.Background(), "c", path, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

func rules(fs []secretscan.Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule+"@"+f.Place())
	}
	return strings.Join(out, " ")
}

// An AWS-style key and a high-entropy token, each in its own commit, and a
// value the run holds as a secret: each is found at its file and line, in
// its commit, and no finding carries the matched text.
func TestScanFindsKeysTokensAndTheRunsSecrets(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	c1 := r.commit("Add config", map[string]string{"cfg/aws.go": "package cfg\n\nconst awsKey = \"" + awsKey + "\"\n"})
	r.commit("Add settings", map[string]string{"settings.py": "x = 1\nSESSION_TOKEN = \"" + hiToken + "\"\n", "notes.txt": "a\nb\nthe value " + runValue + "\n"})
	s, err := secretscan.New([]string{runValue}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := r.scanPush(s, base)
	if got, want := rules(res.Findings), "aws-access-token@cfg/aws.go:3 sandbox-run-secret@notes.txt:3 generic-api-key@settings.py:2"; got != want {
		t.Fatalf("findings %q, want %q", got, want)
	}
	if res.Commits != 2 || res.Findings[0].Commit != c1 {
		t.Fatalf("commits %d, first finding's commit %s (want %s)", res.Commits, res.Findings[0].Commit, c1)
	}
	if res.Bytes == 0 {
		t.Fatal("no bytes counted")
	}
}

// "gitleaks:allow" on the agent's own line does not silence the scan: the
// change cannot allowlist itself.
func TestScanIgnoresInlineAllowComments(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.commit("key", map[string]string{"k.go": "const k = \"" + awsKey + "\" // gitleaks:allow\n"})
	s, _ := secretscan.New(nil, nil)
	if res := scan(t, s, r.log(base)); len(res.Findings) != 1 {
		t.Fatalf("findings %q", rules(res.Findings))
	}
}

// The repository's allowlists accept findings, which are reported apart:
// a .gitleaksignore fingerprint, a .gitleaks.toml path allowlist (one
// aimed at a rule, one at all), and .sandbox.yml's secrets.allow.
func TestAllowlistsAcceptAndReport(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.commit("fixtures", map[string]string{
		"a/key.go":            "const k = \"" + awsKey + "\"\n",
		"testdata/fixture.py": "TOKEN = \"" + hiToken + "\"\n",
		"docs/example.go":     "const k = \"" + awsKey + "\"\n",
		"live.go":             "const k = \"" + awsKey + "\"\n",
	})
	toml := `
[[allowlists]]
description = "docs examples"
paths = ['''^docs/''']
targetRules = ["aws-access-token"]
`
	al, err := secretscan.LoadAllowlist([]byte("# accepted\na/key.go:aws-access-token:1\n"), []byte(toml),
		[]sandboxcfg.SecretAllow{{Path: "testdata/**"}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := secretscan.New(nil, al)
	res := scan(t, s, r.log(base))
	if got := rules(res.Findings); got != "aws-access-token@live.go:1" {
		t.Fatalf("blocking findings %q", got)
	}
	var allowed []string
	for _, f := range res.Allowed {
		allowed = append(allowed, f.File+" by "+f.Allowlist)
	}
	if got, want := strings.Join(allowed, "; "), "a/key.go by .gitleaksignore; docs/example.go by .gitleaks.toml; testdata/fixture.py by .sandbox.yml secrets.allow[0]"; got != want {
		t.Fatalf("allowed %q, want %q", got, want)
	}
}

// A file an attribute marks binary shows no lines in the patch: the scan
// names it, and its content, text after all, is scanned whole.
func TestBinaryMarkedTextIsScannedWhole(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.commit("hide", map[string]string{".gitattributes": "*.cfg binary\n", "app.cfg": "key=" + awsKey + "\n"})
	s, _ := secretscan.New(nil, nil)
	res := scan(t, s, r.log(base))
	if len(res.Findings) != 0 || len(res.Binary) != 1 || res.Binary[0].Path != "app.cfg" {
		t.Fatalf("findings %q, binary %+v", rules(res.Findings), res.Binary)
	}
	got, st := blob(t, s, "app.cfg", "key="+awsKey+"\n")
	if len(got) != 1 || got[0].Rule != "aws-access-token" || got[0].Line != 1 || st.Binary || st.Cut {
		t.Fatalf("content findings %q (%+v)", rules(got), st)
	}
}

// A file with a NUL in its first 8000 bytes is binary to git, and was
// never read: its printable text is scanned now, and a key in it found
// (without a line, which the file does not have).
func TestKeyInANulHoldingFileIsFound(t *testing.T) {
	s, _ := secretscan.New([]string{runValue}, nil)
	content := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\x00\x01\xff", 5000) + "aws_key=" + awsKey + "\x00\x02" + runValue + "\x00"
	got, st := blob(t, s, "assets/blob.dat", content)
	if !st.Binary || rules(got) != "aws-access-token@assets/blob.dat (text in a binary file) sandbox-run-secret@assets/blob.dat (text in a binary file)" {
		t.Fatalf("findings %q (%+v)", rules(got), st)
	}
	if got[0].Line != 0 {
		t.Errorf("a finding in a binary file has line %d", got[0].Line)
	}
}

// A secret the base already had is not the change's: the old content is
// read as a stream, and a secret across two of its reads is still seen.
func TestWithoutDropsWhatTheBaseHad(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.commit("key", map[string]string{"k.go": "const k = \"" + awsKey + "\"\n"})
	s, _ := secretscan.New(nil, nil)
	res := scan(t, s, r.log(base))
	without := func(old string) int {
		got, err := secretscan.WithoutIn(res.Findings, strings.NewReader(old))
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if without("old "+awsKey) != 0 || without("other") != 1 || without(strings.Repeat("x", 1<<20-5)+awsKey) != 0 {
		t.Fatal("WithoutIn does not compare with the old text")
	}
	if p := secretscan.Places(res.Findings, 5); p != "aws-access-token at k.go:1" || bytes.Contains([]byte(p), []byte(awsKey)) {
		t.Fatalf("places %q", p)
	}
}

// The windowed rules find what gitleaks' own detector finds on the whole
// text: secrets on the keyword's line, a value two lines below its key,
// JWTs, Vault tokens, beside lines without any.
func TestWindowedRulesFindWhatGitleaksFinds(t *testing.T) {
	text := strings.Join([]string{
		"package main",
		"var apiToken = \"" + hiToken + "\"",
		"func f() {}",
		"password :=",
		"",
		"  \"Zq8vN3xK1pL7mR4tW9yB2cE6\"",
		"const jwt = \"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\"",
		"x := s.Foo()",
		"vault = \"hvs.CAESIJlWh9fGZ8Kd3sL0pQ7rT2vX5yB8nM4cE1aK6uH9wZ3jGh4KHGh2cy5aTlN3cVpHdlhqT0pMU1dYRTRqaXBmd0w\"",
		"creds: 'aB3dE5gH7jK9mN1pQ3sT5vX7'",
		"nothing here",
	}, "\n") + "\n"
	s, _ := secretscan.New(nil, nil)
	mine := &secretscan.Result{}
	got, _ := blob(t, s, "f.go", text)
	s.Split(mine, got)
	ours := rules(mine.Findings)

	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		t.Fatal(err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		t.Fatal(err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		t.Fatal(err)
	}
	d := detect.NewDetector(cfg)
	d.MaxDecodeDepth = 0
	var theirs []secretscan.Finding
	for _, f := range d.Detect(detect.Fragment{Raw: text, FilePath: "f.go"}) {
		theirs = append(theirs, secretscan.Finding{Rule: f.RuleID, File: "f.go", Line: 1 + f.StartLine})
	}
	res := &secretscan.Result{}
	s.Split(res, theirs)
	if want := rules(res.Findings); ours != want || !strings.Contains(ours, "generic-api-key@f.go:4") || !strings.Contains(ours, "jwt@f.go:7") {
		t.Fatalf("windowed scan found %q\ngitleaks finds      %q", ours, want)
	}
}
