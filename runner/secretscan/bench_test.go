package secretscan_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/secretscan"
)

// The scan's cost beside the floor of `git diff` of the same change, in
// the same run (issue 24's target: at most 3×):
//
//	go test -run '^$' -bench SecretScan -benchtime 5x ./runner/secretscan/
//
// "change-2000-files" is one commit of 2,000 files; "push-50-commits" is
// the same 2,000 files over 50 commits. The scan is what the runner does
// before a push: `git log -p -U0` of the commits, parsed, every added line
// through gitleaks' default rules and the run's own secrets. The floor is
// `git diff` of base..head, its output read. Each iteration times both,
// alternating, and the figures are the medians.
func BenchmarkSecretScan(b *testing.B) {
	for _, tc := range []struct {
		name    string
		commits int
	}{{"change-2000-files", 1}, {"push-50-commits", 50}} {
		b.Run(tc.name, func(b *testing.B) {
			r, base := benchRepo(b, 2000, tc.commits)
			s, err := secretscan.New([]string{runValue}, nil)
			if err != nil {
				b.Fatal(err)
			}
			var scanT, diffT []time.Duration
			findings, added := 0, 0
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				res := scanRange(b, s, r, base)
				scanT = append(scanT, time.Since(t0))
				if res.Commits != tc.commits {
					b.Fatalf("scanned %d commits", res.Commits)
				}
				findings, added = len(res.Findings), res.Bytes
				t0 = time.Now()
				runGit(b, r.dir, "diff", base, "HEAD")
				diffT = append(diffT, time.Since(t0))
			}
			b.StopTimer()
			sm, dm := median(scanT), median(diffT)
			b.ReportMetric(float64(sm.Microseconds())/1000, "scan-ms")
			b.ReportMetric(float64(dm.Microseconds())/1000, "floor-git-diff-ms")
			b.ReportMetric(float64(sm)/float64(dm), "x-git-diff")
			b.ReportMetric(float64(findings), "findings")
			b.ReportMetric(float64(added)/(1<<20), "added-MiB")
		})
	}
}

// benchRepo makes a repository whose head adds files real source files
// (the Go distribution's own, in path order: code, tests, testdata, with
// the keys and tokens of crypto and net among them) over commits commits on
// top of base.
func benchRepo(b *testing.B, files, commits int) (*repo, string) {
	b.Helper()
	src := goSources(b, files)
	r := &repo{dir: b.TempDir()}
	gitB(b, r.dir, "init", "-q", "-b", "main")
	writeFiles(b, r.dir, map[string]string{"README.md": "# bench\n"})
	gitB(b, r.dir, "add", "-A")
	gitB(b, r.dir, "commit", "-q", "-m", "base")
	base := gitB(b, r.dir, "rev-parse", "HEAD")
	per := files / commits
	for c := range commits {
		m := map[string]string{}
		for _, f := range src[c*per : (c+1)*per] {
			m[f.name] = f.content
		}
		writeFiles(b, r.dir, m)
		gitB(b, r.dir, "add", "-A")
		gitB(b, r.dir, "commit", "-q", "-m", fmt.Sprintf("change %d", c))
	}
	return r, base
}

type srcFile struct{ name, content string }

// goSources reads the first n .go files of the Go distribution's src,
// skipping testdata (it holds test keys on purpose) and files over 64 KiB.
func goSources(b *testing.B, n int) []srcFile {
	b.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	var out []srcFile
	errDone := errors.New("done")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		c, err := os.ReadFile(p)
		if err != nil || len(c) > 64<<10 {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, srcFile{rel, string(c)})
		if len(out) == n {
			return errDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		b.Fatal(err)
	}
	if len(out) < n {
		b.Skipf("only %d Go source files under %s", len(out), root)
	}
	return out
}

// scanRange scans what pushing HEAD over base would publish, as the
// runner does: `git log -p -U0` of the commits (files over TextBlobBytes
// shown as binary), then the commit objects through `git cat-file --batch`.
func scanRange(b *testing.B, s *secretscan.Scanner, r *repo, base string) *secretscan.Result {
	var res, commits *secretscan.Result
	gitStream(b, r.dir, nil, func(out io.Reader) (err error) {
		res, err = s.ScanPatch(context.Background(), out)
		return err
	}, "-c", fmt.Sprintf("core.bigFileThreshold=%d", secretscan.TextBlobBytes), "log", "-p", "-U0", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--pretty=medium", "HEAD", "--not", base)
	shas, err := exec.Command("git", "-C", r.dir, "rev-list", "HEAD", "--not", base).Output()
	if err != nil {
		b.Fatal(err)
	}
	gitStream(b, r.dir, bytes.NewReader(shas), func(out io.Reader) (err error) {
		commits, err = s.ScanCommits(context.Background(), out)
		return err
	}, "cat-file", "--batch")
	res.Merge(commits)
	return res
}

// gitStream runs git in dir with stdin and hands its output to read as it
// is written.
func gitStream(b *testing.B, dir string, stdin io.Reader, read func(io.Reader) error, args ...string) {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if err := read(out); err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
