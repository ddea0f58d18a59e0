package harness_test

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

type tarEntry struct {
	name, body string
	typ        byte
}

func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typ, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			h.Size, h.Linkname = 0, "/etc/shadow"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return buf.Bytes()
}

const claudeID = "0b72ff7e-fe7c-4917-be58-b670cf474c21"

// A Claude Code session moves to the new checkout: the transcript's cwd
// fields follow, and the files come out as a clean tar of the session's
// own files only.
func TestClaudeCodeRelocateSession(t *testing.T) {
	t.Parallel()
	c := harness.NewClaudeCode("claude")
	line := `{"type":"user","cwd":"/old/work/repo","message":{"content":"read /old/work/repo/add.sh"}}` + "\n"
	in := tarOf(t, tarEntry{name: claudeID + ".jsonl", body: line}, tarEntry{name: claudeID + "/", typ: tar.TypeDir},
		tarEntry{name: claudeID + "/tool-results/1.txt", body: "out"})
	out, err := c.RelocateSession(in, claudeID, "/old/work/repo", "/new/repo")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == claudeID+".jsonl" {
			b, _ := io.ReadAll(tr)
			if want := `{"type":"user","cwd":"/new/repo","message":{"content":"read /new/repo/add.sh"}}` + "\n"; string(b) != want {
				t.Fatalf("transcript = %s, want %s", b, want)
			}
		}
	}
	if strings.Join(names, " ") != claudeID+".jsonl "+claudeID+"/ "+claudeID+"/tool-results/1.txt" {
		t.Fatalf("entries = %v", names)
	}
}

// What the export holds is the agent's doing, so it is read as hostile:
// nothing but the session's own regular files and directories passes.
func TestClaudeCodeRelocateRefusesForeignEntries(t *testing.T) {
	t.Parallel()
	c := harness.NewClaudeCode("claude")
	transcript := tarEntry{name: claudeID + ".jsonl", body: "{}\n"}
	cases := map[string][]byte{
		"path traversal":   tarOf(t, transcript, tarEntry{name: "../../.bashrc", body: "evil"}),
		"traversal inside": tarOf(t, transcript, tarEntry{name: claudeID + "/../../x", body: "evil"}),
		"absolute":         tarOf(t, transcript, tarEntry{name: "/home/sandbox/.profile", body: "evil"}),
		"other session":    tarOf(t, transcript, tarEntry{name: "other.jsonl", body: "{}"}),
		"symlink":          tarOf(t, transcript, tarEntry{name: claudeID + "/link", typ: tar.TypeSymlink}),
		"no transcript":    tarOf(t, tarEntry{name: claudeID + "/a.txt", body: "x"}),
		"not a tar":        []byte("hello"),
	}
	for name, in := range cases {
		if _, err := c.RelocateSession(in, claudeID, "/a", "/b"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := c.RelocateSession(tarOf(t, transcript), "../x", "/a", "/b"); err == nil {
		t.Error("a session id with a path in it was accepted")
	}
}

// OpenCode's session is copied by the runner's own helper on the run's
// database, never by starting the CLI: the commands name the database
// the run's environment gives, and refuse what cannot be a session id or
// is not a database.
func TestOpenCodeSessionCommands(t *testing.T) {
	t.Parallel()
	o := harness.NewOpenCode("/usr/bin/opencode")
	o.Helper = "/usr/local/bin/sandbox-runner"
	env := []string{"HOME=/home/sandbox", harness.EnvOpenCodeDB + "=/w/state/opencode/opencode.db"}
	cmd, err := o.ExportSession(env, "/w/repo", "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	want := "/usr/local/bin/sandbox-runner opencode-session save --db /w/state/opencode/opencode.db --id ses_1 --dir /w/repo"
	if got := strings.Join(cmd.Args, " "); got != want || cmd.Path != o.Helper {
		t.Fatalf("export = %s, want %s", got, want)
	}
	db := append([]byte("SQLite format 3\x00"), make([]byte, 100)...)
	cmd, err = o.ImportSession(env, "ses_1", "/old/repo", "/w/repo", db)
	if err != nil {
		t.Fatal(err)
	}
	want = "/usr/local/bin/sandbox-runner opencode-session restore --db /w/state/opencode/opencode.db --id ses_1 --from /old/repo --to /w/repo"
	if got := strings.Join(cmd.Args, " "); got != want || cmd.Dir != "/w/repo" || cmd.Stdin == nil {
		t.Fatalf("import = %s in %q, want %s", got, cmd.Dir, want)
	}
	if _, err := o.ImportSession(env, "ses_1", "/old/repo", "/w/repo", []byte(`{"info":{"id":"ses_1"}}`)); err == nil || !strings.Contains(err.Error(), "older runner") {
		t.Errorf("an `opencode export` (an older runner's archive) was accepted: %v", err)
	}
	if _, err := o.ExportSession(env, "/r", "--help"); err == nil {
		t.Error("a flag was accepted as a session id")
	}
	if _, err := o.ExportSession([]string{"HOME=/home/sandbox"}, "/r", "ses_1"); err == nil || !strings.Contains(err.Error(), harness.EnvOpenCodeDB) {
		t.Errorf("without the run's own database: %v", err)
	}
	if _, err := harness.NewOpenCode("opencode").ExportSession(env, "/r", "ses_1"); err == nil {
		t.Error("a session was exported without the helper")
	}
}
