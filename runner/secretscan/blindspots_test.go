package secretscan_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/secretscan"
)

// A key in a file's name is found, and no place the scan reports (the
// name's finding, nor one in the same file's content) shows it.
func TestKeyInAFileNameIsFound(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.commit("names", map[string]string{
		"keys/" + awsKey + ".txt": "token = \"" + hiToken + "\"\n",
		"plain.txt":               "nothing\n",
	})
	s, _ := secretscan.New(nil, nil)
	res := r.scanPush(s, base)
	got := rules(res.Findings)
	want := "aws-access-token@keys/[REDACTED].txt (in the file's name) generic-api-key@keys/[REDACTED].txt:1"
	if got != want {
		t.Fatalf("findings %q, want %q", got, want)
	}
	if strings.Contains(secretscan.Places(res.Findings, 10), awsKey) || strings.Contains(s.MaskPath("keys/"+awsKey+".txt"), awsKey) {
		t.Fatal("a place shows the key in the name")
	}
}

// Everything a push publishes of a commit besides its change is scanned:
// the author's and committer's names and emails, a header of the agent's
// own (git hash-object writes any), and the message of a commit that
// changes nothing, which shows in no patch.
func TestCommitIdentitiesHeadersAndEmptyCommitsAreScanned(t *testing.T) {
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	c := gitCmd(r.dir, "commit", "-q", "--allow-empty", "--author", "dev "+awsKey+" <a@example.com>", "-m", "nothing")
	c.Env = append(c.Env, "GIT_COMMITTER_NAME=ci "+awsKey)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("commit: %v\n%s", err, out)
	}
	tree := r.git("rev-parse", "HEAD^{tree}")
	parent := r.git("rev-parse", "HEAD")
	obj := fmt.Sprintf("tree %s\nparent %s\nauthor a <a@example.com> 1700000000 +0000\ncommitter c <%s@example.com> 1700000000 +0000\nx-note vault hvs.CAESIJlWh9fGZ8Kd3sL0pQ7rT2vX5yB8nM4cE1aK6uH9wZ3jGh4KHGh2cy5aTlN3cVpHdlhqT0pMU1dYRTRqaXBmd0w\n\nsubject\n\nbody with %s\n",
		tree, parent, runValue, hiToken)
	sha := hashObject(t, r, obj)
	r.git("update-ref", "HEAD", sha)
	r.git("commit", "-q", "--allow-empty", "-m", "empty, but its message holds "+awsKey)
	s, _ := secretscan.New([]string{runValue}, nil)
	res := r.scanPush(s, base)
	got := rules(res.Findings)
	for _, want := range []string{
		"aws-access-token@(commit headers):3", // author
		"aws-access-token@(commit headers):4", // committer
		"sandbox-run-secret@(commit headers):4",
		"vault-service-token@(commit headers):5",
		"aws-access-token@(commit message):1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("findings %q lack %s", got, want)
		}
	}
	if res.Commits != 3 {
		t.Errorf("commits scanned: %d, want 3", res.Commits)
	}
}

func hashObject(t *testing.T, r *repo, obj string) string {
	t.Helper()
	cmd := gitCmd(r.dir, "hash-object", "-t", "commit", "-w", "--stdin", "--literally")
	cmd.Stdin = strings.NewReader(obj)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hash-object: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Content larger than a chunk is scanned in pieces whose overlap holds
// what spans a cut: a private key block across the first cut and a value
// on the line after its keyword are found once each, at their lines.
func TestMatchesAcrossChunksAreFoundOnce(t *testing.T) {
	filler := strings.Repeat("x := 1 // filler line of some length\n", 1<<20/36)
	lines := strings.Count(filler, "\n")
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\naNvWQn8qJ5MRt1C0TSMdrO7DsbpFfZk1UtX3L9JmW5bQZlzqxKX1b4cGQ2nXRjFO\n-----END RSA PRIVATE KEY-----\n"
	text := filler[:len(filler)-200] + "\n" + key + filler + "password :=\n\n  \"Zq8vN3xK1pL7mR4tW9yB2cE6\"\n"
	s, _ := secretscan.New(nil, nil)
	got, st := blob(t, s, "big.go", text)
	keyLine := strings.Count(filler[:len(filler)-200]+"\n", "\n") + 1
	want := fmt.Sprintf("private-key@big.go:%d generic-api-key@big.go:%d", keyLine, keyLine+4+lines)
	res := &secretscan.Result{}
	s.Split(res, got)
	if g := rules(res.Findings); g != want || st.Binary || st.Cut {
		t.Fatalf("findings %q (%+v), want %q", g, st, want)
	}
}

// One blob is read as a stream and only its first MaxBlobBytes: a blob of
// four times that is read to the bound and no further, a key within it is
// found, one past it is not, and the scan says the blob was cut.
func TestALargeBlobIsReadToItsBoundOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 32 MiB through the scanner; skipped under -short")
	}
	s, _ := secretscan.New(nil, nil)
	src := &zeros{size: 4 * secretscan.MaxBlobBytes, at: map[int64]string{
		10 << 20:                        "\x00aws_key=" + awsKey + "\x00",
		secretscan.MaxBlobBytes + 1<<20: "\x00aws_key=AKIAQ2W3E4R5T6Y7U2I3\x00",
	}}
	got, st, err := s.ScanBlob(context.Background(), "c", "disk.dat", src)
	if err != nil {
		t.Fatal(err)
	}
	if rules(got) != "aws-access-token@disk.dat (text in a binary file)" || !st.Cut || !st.Binary {
		t.Fatalf("findings %q (%+v)", rules(got), st)
	}
	if src.read > secretscan.MaxBlobBytes+1 {
		t.Fatalf("read %d bytes of the blob, more than the bound of %d", src.read, secretscan.MaxBlobBytes)
	}
}

// zeros is a blob of size zero bytes with strings written at offsets,
// made as it is read (never held whole); it counts what was read.
type zeros struct {
	size, off, read int64
	at              map[int64]string
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.off >= z.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.size-z.off))
	clear(p[:n])
	for off, s := range z.at {
		if off+int64(len(s)) > z.off && off < z.off+int64(n) {
			for i := range len(s) {
				if o := off + int64(i) - z.off; o >= 0 && o < int64(n) {
					p[o] = s[i]
				}
			}
		}
	}
	z.off += int64(n)
	z.read += int64(n)
	return n, nil
}
