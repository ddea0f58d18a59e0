package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
)

var _ SessionPorter = (*OpenCode)(nil)

// EnvOpenCodeDB is where OpenCode keeps its sessions (opencode-ai 1.18
// reads it; without it, opencode.db or opencode-<channel>.db under its XDG
// data directory). The runner sets it to a database of the run's own, so
// that the file holds this run's sessions and nothing else: on the host
// the default one is the person's, with every session they ever had.
const EnvOpenCodeDB = "OPENCODE_DB"

// sessionHelper builds a run of the runner's own `opencode-session`
// subcommand (package ocdb) on the database env names.
func (o *OpenCode) sessionHelper(env []string, op, id string, args ...string) (*exec.Cmd, error) {
	if o.Helper == "" {
		return nil, errors.New("opencode harness: no sandbox-runner binary to copy the session with")
	}
	db := lookupEnvValue(env, EnvOpenCodeDB)
	if db == "" {
		return nil, fmt.Errorf("opencode harness: %s is not set: the run has no session database of its own", EnvOpenCodeDB)
	}
	if id == "" || strings.HasPrefix(id, "-") {
		return nil, fmt.Errorf("opencode harness: %q is not a session id", id)
	}
	cmd := exec.Command(o.Helper, append([]string{occopy.Subcommand, op, "--db", db, "--id", id}, args...)...)
	cmd.Env = env
	return cmd, nil
}

// ExportSession implements SessionPorter: a copy of OpenCode's database,
// which holds the run's sessions only, with the text of its values.
func (o *OpenCode) ExportSession(env []string, dir, id string) (*exec.Cmd, error) {
	cmd, err := o.sessionHelper(env, "save", id, "--dir", dir)
	if err != nil {
		return nil, err
	}
	cmd.Dir = dir
	return cmd, nil
}

// SessionData implements SessionPorter: the archive carries the database
// copy; the runner looks for secrets in the text of its values, which the
// file's own bytes may split where a value spills over SQLite's pages.
func (o *OpenCode) SessionData(export []byte) (data, text []byte, err error) {
	return occopy.Split(export)
}

// ImportSession implements SessionPorter: the copy becomes the database of
// this run, with the session moved to the checkout to (OpenCode continues
// a session only in the directory it records).
func (o *OpenCode) ImportSession(env []string, id, from, to string, data []byte) (*exec.Cmd, error) {
	if !occopy.IsDatabase(data) {
		return nil, occopy.ErrNotDatabase
	}
	cmd, err := o.sessionHelper(env, "restore", id, "--from", from, "--to", to)
	if err != nil {
		return nil, err
	}
	cmd.Dir = to
	cmd.Stdin = bytes.NewReader(data)
	return cmd, nil
}
