package runner_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// What the scan once did not read (issue 29): a key in a file with a NUL
// in its first 8000 bytes, and a key in a file's name. Each holds the push
// back; nothing is pushed; the receipt, the log and the progress name the
// rule and the place, never the key (the file's name is masked).
func TestSecretScanReadsBinaryFilesAndNames(t *testing.T) {
	t.Parallel()
	const nameKey = "AKIAM3N5B7V2C4X6Z2L3"
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg := commandCfg(`cat > /dev/null; mkdir -p assets keys
printf 'PK\003\004\000\000\001\002aws_key=` + fakeAWSKey + `\000\377' > assets/blob.dat
echo placeholder > keys/` + nameKey + `.txt
echo done`)
	cfg.Repair.Attempts = new(int)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	if sha := remote.SHA(t, o.TargetBranch); sha != "" {
		t.Fatalf("the branch was pushed (%s)", sha)
	}
	var places []string
	if res.SecretScan != nil {
		for _, f := range res.SecretScan.Findings {
			places = append(places, f.Rule+"@"+f.File)
		}
	}
	got := strings.Join(places, " ")
	for _, want := range []string{"aws-access-token@assets/blob.dat", "aws-access-token@keys/[REDACTED].txt"} {
		if !strings.Contains(got, want) {
			t.Errorf("findings %q lack %s", got, want)
		}
	}
	for _, want := range []string{"at assets/blob.dat (text in a binary file)", "at keys/[REDACTED].txt (in the file's name)"} {
		if res.Error == nil || !strings.Contains(res.Error.Message, want) {
			t.Errorf("the error lacks %q: %+v", want, res.Error)
		}
	}
	for _, v := range []string{nameKey} {
		if hits := grepTree(t, o.OutputDir, v); len(hits) > 0 {
			t.Errorf("%s found in %v", v, hits)
		}
		if strings.Contains(e.log.String(), v) || strings.Contains(e.progress.String(), v) {
			t.Errorf("%s found in the runner's log or progress", v)
		}
	}
	assertNoValue(t, o.OutputDir, e)
}

// A key in the author and committer of a commit the agent made itself, and
// in the message of an empty commit it made (which no patch shows), holds
// the push back; the net change is clean, so the held commits are
// rewritten into the runner's own and pushed: the branch's history (every
// header, every message) never holds the key.
func TestSecretScanReadsCommitHeaders(t *testing.T) {
	t.Parallel()
	const authorKey = "AKIAR5T2W7Q3E4Y6U2I7"
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg := commandCfg(`cat > /dev/null; echo note > NOTES.md
git add NOTES.md && GIT_COMMITTER_NAME='ci ` + authorKey + `' git -c user.name='dev ` + authorKey + `' -c user.email=dev@example.com commit -q -m 'notes'
git -c user.name=dev -c user.email=dev@example.com commit -q --allow-empty -m 'the key is ` + authorKey + `'
echo done`)
	cfg.Repair.Attempts = new(int)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if hist := runtest.Git(t, remote.Dir, "log", "--format=raw", "main.."+o.TargetBranch); hist == "" || strings.Contains(hist, authorKey) {
		t.Fatalf("the branch's history:\n%s", hist)
	}
	if got, _ := remote.File(t, o.TargetBranch, "NOTES.md"); strings.TrimSpace(got) != "note" {
		t.Fatalf("NOTES.md on the branch = %q", got)
	}
	if ss := res.SecretScan; ss == nil || ss.Repaired < 2 || ss.Squashed != 1 || len(ss.Findings) != 0 {
		t.Fatalf("secret_scan = %+v", ss)
	}
	if hits := grepTree(t, o.OutputDir, authorKey); len(hits) > 0 || strings.Contains(e.log.String(), authorKey) || strings.Contains(e.progress.String(), authorKey) {
		t.Fatalf("the key reached %v, the log or the progress", hits)
	}
}
