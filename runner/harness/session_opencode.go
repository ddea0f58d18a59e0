package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

var _ SessionPorter = (*OpenCode)(nil)

// sessionCmd is opencode run's surroundings for a session command (name
// with args, name being opencode or a shell that runs it): the checkout as
// working directory and $PWD, offline defaults.
func (o *OpenCode) sessionCmd(env []string, dir, name string, args ...string) (*exec.Cmd, error) {
	if o.bin == "" {
		return nil, errors.New("opencode harness: no opencode binary configured")
	}
	if dir == "" {
		return nil, errors.New("opencode harness: no working directory")
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = envDefaults(append(WithoutEnv(env, "PWD"), "PWD="+dir), openCodeEnv())
	return cmd, nil
}

// ExportSession implements SessionPorter: `opencode export <id>` prints the
// session (its info, messages and parts) as JSON, from OpenCode's own
// storage under the agent's XDG data directory.
func (o *OpenCode) ExportSession(env []string, dir, id string) (*exec.Cmd, error) {
	// The id goes without "--", which OpenCode's argument parser takes as
	// the end of its positionals (it would then ask which session, and
	// wait). A session id of OpenCode's never starts with "-".
	if id == "" || strings.HasPrefix(id, "-") {
		return nil, fmt.Errorf("opencode harness: %q is not a session id to export", id)
	}
	return o.sessionCmd(env, dir, o.bin, "export", id)
}

// RelocateSession implements SessionPorter. OpenCode continues a session
// only in the directory it records (elsewhere `run --session` waits for
// ever), so the session's directory and the paths of its messages move to
// the new checkout.
func (o *OpenCode) RelocateSession(data []byte, id, from, to string) ([]byte, error) {
	var head struct {
		Info struct {
			ID        string `json:"id"`
			Directory string `json:"directory"`
		} `json:"info"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("opencode session export is not JSON: %w", err)
	}
	if head.Info.ID != id {
		return nil, fmt.Errorf("opencode session export holds session %q, not %q", head.Info.ID, id)
	}
	if head.Info.Directory != from {
		return nil, fmt.Errorf("opencode session %s was made in %q, not %q", id, head.Info.Directory, from)
	}
	return relocateJSON(data, from, to), nil
}

// ImportSession implements SessionPorter: `opencode import FILE` stores
// the export (replacing a session of the same id). The export comes on
// stdin, and a shell running as the agent first writes it to a file of the
// agent's own: OpenCode opens its argument by name, and in the sandbox the
// runner's end of a pipe cannot be reopened through /dev/stdin by the
// agent, who is another user.
func (o *OpenCode) ImportSession(env []string, dir, id string, data []byte) (*exec.Cmd, error) {
	cmd, err := o.sessionCmd(env, dir, "sh", "-c", `set -e
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/session.json"
"$0" import "$d/session.json"`, o.bin)
	if err != nil {
		return nil, err
	}
	cmd.Stdin = bytes.NewReader(data)
	return cmd, nil
}
