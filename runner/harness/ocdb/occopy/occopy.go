// Package occopy is the format of an OpenCode session's copy (package
// ocdb writes and restores it, as the agent): a tar of the database file
// and the text of every value in it. It holds no SQLite, so the runner's
// side, which only checks and carries the copy, links none: every binary
// that imports the harness would otherwise carry the SQLite driver.
package occopy

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Subcommand is the runner's subcommand that saves and restores a copy, as
// the agent (ocdb.Main).
const Subcommand = "opencode-session"

// The entries of the tar Save writes.
const (
	DBEntry   = "opencode.db"
	TextEntry = "text"
)

// MaxBytes caps a database copy and its text, as the session archive
// caps what it carries (agentsession.MaxDataBytes).
const MaxBytes = 32 << 20

// magic opens every SQLite database file.
var magic = []byte("SQLite format 3\x00")

// ErrNotDatabase: session data that is not a SQLite database.
var ErrNotDatabase = errors.New("the session data is not an OpenCode database (an archive of an older runner holds an `opencode export`)")

// IsDatabase reports whether b looks like a SQLite database file.
func IsDatabase(b []byte) bool { return bytes.HasPrefix(b, magic) }

// Split reads the tar Save wrote: the database copy and its text.
func Split(b []byte) (db, text []byte, err error) {
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("the OpenCode session copy is not a tar archive: %w", err)
		}
		var dst *[]byte
		switch h.Name {
		case DBEntry:
			dst = &db
		case TextEntry:
			dst = &text
		default:
			return nil, nil, fmt.Errorf("the OpenCode session copy has an unexpected entry %q", h.Name)
		}
		if h.Typeflag != tar.TypeReg || h.Size > MaxBytes || *dst != nil {
			return nil, nil, fmt.Errorf("the OpenCode session copy's entry %q is not one regular file under %d bytes", h.Name, MaxBytes)
		}
		if *dst, err = io.ReadAll(io.LimitReader(tr, MaxBytes)); err != nil {
			return nil, nil, err
		}
	}
	if db == nil || text == nil {
		return nil, nil, errors.New("the OpenCode session copy lacks the database or its text")
	}
	if !IsDatabase(db) {
		return nil, nil, errors.New("the OpenCode session copy is not a SQLite database")
	}
	return db, text, nil
}

// JSONString is s as it appears inside a JSON string (no quotes), the way
// JavaScript's JSON.stringify writes it (no HTML escaping).
func JSONString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	q := strings.TrimSpace(b.String())
	return q[1 : len(q)-1]
}
