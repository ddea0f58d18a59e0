package ocdb_test

import (
	"bytes"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb"
	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
)

// fixture writes a database shaped as OpenCode 1.18 keeps one (WAL mode;
// the session's directory, its project's worktree, messages and events as
// JSON text) for session ses_1 made in /old/repo, and returns its path.
// Rows are still in the write-ahead log when the copy is taken, as when
// the CLI has just exited.
func fixture(t *testing.T, extra ...string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "opencode.db")
	db, err := sql.Open("sqlite", "file:"+src+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmts := append([]string{
		`CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, time_created INTEGER)`,
		`CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, directory TEXT NOT NULL, cost REAL, title TEXT)`,
		`CREATE TABLE part (id TEXT PRIMARY KEY, session_id TEXT, data TEXT NOT NULL)`,
		`CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id TEXT, seq INTEGER, data TEXT NOT NULL)`,
		`INSERT INTO project VALUES ('p1', '/old/repo', 1795780687592)`,
		`INSERT INTO session VALUES ('ses_1', 'p1', '/old/repo', 0.00405, 'Plan')`,
		`INSERT INTO part VALUES ('prt_1', 'ses_1', '{"type":"tool","state":{"input":{"filePath":"/old/repo/add.sh"},"output":"see /old/repository"},"path":{"cwd":"/old/repo"}}')`,
		`INSERT INTO event VALUES ('evt_1', 'ses_1', 0, '{"info":{"directory":"/old/repo"}}')`,
	}, extra...)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// The agent's directory, as the CLI left it: the database and its log.
	dir := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "opencode.db"+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "opencode.db")
}

func save(t *testing.T, path, id, dir string) (db, text []byte) {
	t.Helper()
	var out bytes.Buffer
	if err := ocdb.Save(path, id, dir, &out); err != nil {
		t.Fatal(err)
	}
	db, text, err := occopy.Split(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return db, text
}

func query(t *testing.T, path, q string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

// The plan's session leaves as one file with the text of every value
// (the rows still in the write-ahead log included) and comes back in
// another checkout: the directory, the worktree and the paths in the JSON
// text move, a neighbour's path and the numbers stay.
func TestSaveAndRestoreMoveTheSession(t *testing.T) {
	t.Parallel()
	db, text := save(t, fixture(t), "ses_1", "/old/repo")
	for _, want := range []string{"/old/repo/add.sh", `{"info":{"directory":"/old/repo"}}`, "CREATE TABLE part"} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	dst := filepath.Join(t.TempDir(), "agent", "opencode", "opencode.db")
	if err := ocdb.Restore(dst, "ses_1", "/old/repo", "/new/r", bytes.NewReader(db)); err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		`SELECT directory FROM session`: "/new/r",
		`SELECT worktree FROM project`:  "/new/r",
		`SELECT data FROM part`:         `{"type":"tool","state":{"input":{"filePath":"/new/r/add.sh"},"output":"see /old/repository"},"path":{"cwd":"/new/r"}}`,
		`SELECT data FROM event`:        `{"info":{"directory":"/new/r"}}`,
		`SELECT cost FROM session`:      "0.00405",
	}
	for q, want := range checks {
		if got := query(t, dst, q); got != want {
			t.Errorf("%s = %s, want %s", q, got, want)
		}
	}
	for p, mode := range map[string]os.FileMode{dst: 0o600, filepath.Dir(dst): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, mode)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("beside the restored database: %v, want nothing", entries)
	}
}

// What the copy holds is the agent's doing: the helper refuses another
// session, a session of another checkout, a damaged file and anything
// that is not a database, and replaces a database (and its stale log)
// that was there.
func TestSaveAndRestoreRefuseWhatIsNotTheSession(t *testing.T) {
	t.Parallel()
	src := fixture(t)
	var out bytes.Buffer
	if err := ocdb.Save(src, "ses_2", "/old/repo", &out); err == nil || !strings.Contains(err.Error(), "no session ses_2") {
		t.Errorf("save of another session: %v", err)
	}
	if err := ocdb.Save(src, "ses_1", "/elsewhere", &out); err == nil || !strings.Contains(err.Error(), `made in "/old/repo"`) {
		t.Errorf("save of a session made elsewhere: %v", err)
	}
	db, _ := save(t, src, "ses_1", "/old/repo")
	damaged := bytes.Clone(db)
	for i := 100; i < len(damaged); i += 7 {
		damaged[i] ^= 0x5a
	}
	dst := filepath.Join(t.TempDir(), "opencode.db")
	cases := map[string]struct {
		id, from string
		data     []byte
		want     string
	}{
		"another session":  {"ses_2", "/old/repo", db, "no session ses_2"},
		"another checkout": {"ses_1", "/elsewhere", db, `made in "/old/repo"`},
		"not a database":   {"ses_1", "/old/repo", []byte(`{"info":{"id":"ses_1"}}`), "older runner"},
		"damaged":          {"ses_1", "/old/repo", damaged, ""},
	}
	for name, c := range cases {
		err := ocdb.Restore(dst, c.id, c.from, "/new", bytes.NewReader(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Fatalf("%s: a database was left at %s", name, dst)
		}
	}
	// A database and a log from before are replaced, not mixed in.
	os.WriteFile(dst, []byte("old"), 0o600)
	os.WriteFile(dst+"-wal", []byte("stale log"), 0o600)
	if err := ocdb.Restore(dst, "ses_1", "/old/repo", "/old/repo", bytes.NewReader(db)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst + "-wal"); err == nil {
		t.Error("the old database's log was left beside the restored one")
	}
	if got := query(t, dst, `SELECT directory FROM session`); got != "/old/repo" {
		t.Errorf("directory = %s", got)
	}
}

// The runner looks for the run's secrets in the text, not in the file's
// bytes: a long value (a tool's output) spills over SQLite's pages, and
// where a page ends the value's bytes are split by the next page's
// header. The text has it whole wherever it falls. The values here differ
// in length by less than the secret's, so the ends of their pages move
// across it.
func TestTheTextHoldsWhatThePagesSplit(t *testing.T) {
	t.Parallel()
	const secret = "sk-CANARY-0123456789abcdefghij"
	var rows []string
	for i := 0; i < 4100/25; i++ {
		value := strings.Repeat("x", 1000) + secret + strings.Repeat("y", 9000+25*i)
		rows = append(rows, fmt.Sprintf(`INSERT INTO part VALUES ('prt_x%d', 'ses_1', '%s')`, i, value))
	}
	db, text := save(t, fixture(t, rows...), "ses_1", "/old/repo")
	if n := bytes.Count(text, []byte(secret)); n != len(rows) {
		t.Fatalf("the text holds the secret %d times, want %d", n, len(rows))
	}
	// A secret cut by a page's end: its start without its whole. (The
	// file may also hold whole stale copies of live cells in the unused
	// space of its pages, so whole copies are not counted.)
	if starts, whole := bytes.Count(db, []byte(secret[:15])), bytes.Count(db, []byte(secret)); starts == whole {
		t.Fatal("no page end split a value in the file: the test no longer shows why the text is scanned")
	}
}

// A value deleted before the copy (the CLI rewrites and prunes its rows)
// does not travel in free pages or in the log: the copy holds the live
// rows only.
func TestTheCopyHoldsNoDeletedRows(t *testing.T) {
	t.Parallel()
	const secret = "sk-DELETED-0123456789abcdefghij"
	src := fixture(t, `INSERT INTO part VALUES ('prt_2', 'ses_1', '`+strings.Repeat(secret, 200)+`')`, `DELETE FROM part WHERE id = 'prt_2'`)
	raw, _ := os.ReadFile(src + "-wal")
	if !bytes.Contains(raw, []byte(secret)) {
		t.Fatal("the fixture's log lacks the deleted value: the test shows nothing")
	}
	db, text := save(t, src, "ses_1", "/old/repo")
	if bytes.Contains(db, []byte(secret)) || bytes.Contains(text, []byte(secret)) {
		t.Error("a deleted value travelled with the copy")
	}
}

var update = flag.Bool("update", false, "rewrite the runner's fixture runner/testdata/plan-session.db")

// TestTheRunnersFixtureIsAPlanSession keeps runner/testdata/plan-session.db
// (a plan's session database that the runner's tests restore as the agent)
// what they take it for: session ses_1 made in /old/repo. The runner's
// tests read it as a file so that their binary links no SQLite; -update
// writes it again.
func TestTheRunnersFixtureIsAPlanSession(t *testing.T) {
	want := filepath.Join("..", "..", "testdata", "plan-session.db")
	if *update {
		p := filepath.Join(t.TempDir(), "opencode.db")
		db, err := sql.Open("sqlite", "file:"+p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{
			`CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT NOT NULL)`,
			`CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT NOT NULL)`,
			`INSERT INTO session VALUES ('ses_1', '/old/repo')`,
			`INSERT INTO message VALUES ('msg_1', 'ses_1', '{"path":{"cwd":"/old/repo"}}')`,
		} {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(want, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Read from a copy: SQLite may leave a journal beside what it opens.
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (go test ./runner/harness/ocdb -run TestTheRunnersFixtureIsAPlanSession -update writes it)", err)
	}
	p := filepath.Join(t.TempDir(), "opencode.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := query(t, p, `SELECT directory FROM session WHERE id = 'ses_1'`); got != "/old/repo" {
		t.Errorf("session ses_1 was made in %q, want /old/repo", got)
	}
	if got := query(t, p, `SELECT data FROM message WHERE session_id = 'ses_1'`); !strings.Contains(got, `"cwd":"/old/repo"`) {
		t.Errorf("ses_1's message is %q, want its cwd /old/repo", got)
	}
}
