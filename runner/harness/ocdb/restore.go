package ocdb

import (
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
)

// Restore makes the database copy read from r (what Save wrote as
// occopy.DBEntry) the database at path, private to whoever runs it (the agent),
// after checking that it holds session id made in the checkout from, and
// moving that session to the checkout to: OpenCode continues a session
// only in the directory it records (elsewhere `run --session` waits for
// ever). A database already at path is replaced: the execute run restores
// before its agent first starts, so there is none but the plan's own when
// the plan ran in the same place.
func Restore(path, id, from, to string, r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, occopy.MaxBytes+1))
	if err != nil {
		return err
	}
	switch {
	case len(b) > occopy.MaxBytes:
		return fmt.Errorf("the OpenCode database copy is over the %d-byte cap", occopy.MaxBytes)
	case !occopy.IsDatabase(b):
		return occopy.ErrNotDatabase
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".restore")
	removeDB(tmp)
	defer removeDB(tmp)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := relocate(tmp, id, from, to); err != nil {
		return err
	}
	// A write-ahead log left beside the old database would be replayed
	// into the new one.
	removeDB(path)
	return os.Rename(tmp, path)
}

// relocate checks the copy at path and moves session id's checkout from
// from to to in every text value: a value that is from, a path below it,
// and either inside JSON text (OpenCode keeps messages, parts and events
// as JSON).
func relocate(path, id, from, to string) error {
	db, err := open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA quick_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("the OpenCode database copy is damaged: %s %v", ok, err)
	}
	if err := checkSession(db, id, from); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	tables, err := tablesOf(db)
	if err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range tables {
		if err := relocateTable(tx, t, from, to); err != nil {
			return fmt.Errorf("move table %s of the OpenCode database to %s: %w", t, to, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return checkSession(db, id, to)
}

// relocateTable rewrites from to to in every text value of table t.
func relocateTable(tx *sql.Tx, t, from, to string) error {
	cols, err := column(tx, `SELECT name FROM pragma_table_info(?)`, t)
	if err != nil {
		return err
	}
	pairs := [][2]string{{`"` + occopy.JSONString(from) + `"`, `"` + occopy.JSONString(to) + `"`}, {occopy.JSONString(from) + "/", occopy.JSONString(to) + "/"}}
	if raw := from + "/"; raw != pairs[1][0] {
		pairs = append(pairs, [2]string{raw, to + "/"})
	}
	for _, c := range cols {
		col := quoteIdent(c)
		expr := col
		var args []any
		for _, p := range pairs {
			expr = "replace(" + expr + ", ?, ?)"
			args = append(args, p[0], p[1])
		}
		q := `UPDATE ` + quoteIdent(t) + ` SET ` + col + ` = CASE WHEN ` + col + ` = ? THEN ? ELSE ` + expr + ` END WHERE typeof(` + col + `) = 'text' AND (instr(` + col + `, ?) > 0 OR instr(` + col + `, ?) > 0)`
		args = append([]any{from, to}, append(args, from, occopy.JSONString(from))...)
		if _, err := tx.Exec(q, args...); err != nil {
			return fmt.Errorf("column %s: %w", c, err)
		}
	}
	return nil
}
