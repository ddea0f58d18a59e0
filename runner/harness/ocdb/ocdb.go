// Package ocdb carries an OpenCode session from one sandbox to another as
// OpenCode's own storage: the SQLite database the CLI keeps its sessions
// in (opencode-ai 1.18: $OPENCODE_DB, else opencode.db under its XDG data
// directory), copied as a file. It replaces `opencode export` and `opencode
// import`, each a whole start of the CLI (about 4 s of CPU, a fifth of a
// plan run), with a few milliseconds of SQLite.
//
// Its functions run as the agent, in a child process of the runner
// (`sandbox-runner opencode-session`): the database is the agent's, private
// to it, and what the agent wrote is never parsed by the process that
// holds the token. The runner gets the copy and the text of every value in
// it (to look for secrets in) on a pipe, and hands the copy back on one.
package ocdb

import (
	"archive/tar"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// open opens the database at path. trusted_schema off: views and
// triggers in the file (whoever wrote it) may not call functions with
// side effects.
func open(path string) (*sql.DB, error) {
	q := url.Values{"_pragma": {"busy_timeout(5000)", "trusted_schema(off)"}}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// checkSession fails unless the database holds session id made in dir.
func checkSession(db *sql.DB, id, dir string) error {
	var made string
	err := db.QueryRow(`SELECT directory FROM session WHERE id = ?`, id).Scan(&made)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("the OpenCode database holds no session %s", id)
	case err != nil:
		return fmt.Errorf("read session %s from the OpenCode database: %w", id, err)
	case made != dir:
		return fmt.Errorf("OpenCode session %s was made in %q, not %q", id, made, dir)
	}
	return nil
}

// Save writes to w a tar of a self-contained copy of the database at path
// (occopy.DBEntry: VACUUM INTO keeps the live rows only, with nothing left in a
// write-ahead log or in free pages) and the text of every value in that
// copy (occopy.TextEntry). It fails unless the database holds session id made in
// the checkout dir.
func Save(path, id, dir string, w io.Writer) error {
	src, err := open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := checkSession(src, id, dir); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".save")
	removeDB(tmp)
	defer removeDB(tmp)
	if _, err := src.Exec(`VACUUM INTO ?`, tmp); err != nil {
		return fmt.Errorf("copy the OpenCode database: %w", err)
	}
	text, err := textOf(tmp)
	if err != nil {
		return err
	}
	db, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	if len(db) > occopy.MaxBytes || len(text) > occopy.MaxBytes {
		return fmt.Errorf("the OpenCode database copy is %d bytes with %d bytes of text, over the %d-byte cap", len(db), len(text), occopy.MaxBytes)
	}
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		body []byte
	}{{occopy.DBEntry, db}, {occopy.TextEntry, text}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// textOf makes the copy at path a single file (no write-ahead log) and
// returns the text of every value in it, the schema included, one value
// a line: what the database holds, whole, where a value that spills over
// SQLite's pages would be split in the file's own bytes.
func textOf(path string) ([]byte, error) {
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		return nil, fmt.Errorf("OpenCode database copy: %w", err)
	}
	tables, err := tablesOf(db)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, t := range tables {
		if err := appendValues(db, `SELECT * FROM `+quoteIdent(t), &out); err != nil {
			return nil, fmt.Errorf("read table %s of the OpenCode database: %w", t, err)
		}
	}
	if err := appendValues(db, `SELECT sql FROM sqlite_master`, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// appendValues writes every text and blob value query returns, each
// followed by a newline.
func appendValues(db *sql.DB, query string, out *bytes.Buffer) error {
	rows, err := db.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for _, v := range vals {
			switch v := v.(type) {
			case string:
				out.WriteString(v)
			case []byte:
				out.Write(v)
			default:
				continue
			}
			out.WriteByte('\n')
			if out.Len() > occopy.MaxBytes {
				return fmt.Errorf("the OpenCode database holds more than %d bytes of text", occopy.MaxBytes)
			}
		}
	}
	return rows.Err()
}

// tablesOf lists the database's ordinary tables: not SQLite's own, not
// virtual ones (their rows live in ordinary shadow tables).
func tablesOf(db querier) ([]string, error) {
	names, err := column(db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND upper(sql) NOT LIKE 'CREATE VIRTUAL%' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list the OpenCode database's tables: %w", err)
	}
	return names, nil
}

// querier is a database or a transaction.
type querier interface {
	Query(query string, args ...any) (*sql.Rows, error)
}

// column is the one text column query returns.
func column(db querier, query string, args ...any) ([]string, error) {
	rows, err := db.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// removeDB removes a database file and what SQLite keeps beside it.
func removeDB(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		_ = os.Remove(p)
	}
}
