package harness

import (
	"bytes"
	"os/exec"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
)

// SessionPorter is a harness whose agent sessions can leave the sandbox
// they were made in and be resumed in another one (the plan's session in
// the execute sandbox). Sessions travel as the CLI's own storage, copied
// as files, never by starting the CLI: the runner runs the commands as the
// agent, so the session is read from and written to the agent's own
// directories with the agent's ownership.
type SessionPorter interface {
	// ExportSession builds the process that prints session id, made in
	// the checkout dir, on stdout.
	ExportSession(env []string, dir, id string) (*exec.Cmd, error)
	// SessionData splits what the export printed into the data an archive
	// carries and the text the runner looks for secrets in.
	SessionData(export []byte) (data, text []byte, err error)
	// ImportSession builds the process that stores data (on its stdin)
	// where the CLI finds session id, moved from the checkout from to the
	// checkout to. It refuses data that is not that session's.
	ImportSession(env []string, id, from, to string, data []byte) (*exec.Cmd, error)
}

// relocateJSON rewrites the checkout path from to to in JSON text: every
// string that is from, and every path below it. It works on the encoded
// text, so numbers and key order stay exactly as the CLI wrote them.
func relocateJSON(data []byte, from, to string) []byte {
	if from == to || from == "" {
		return data
	}
	f, t := occopy.JSONString(from), occopy.JSONString(to)
	data = bytes.ReplaceAll(data, []byte(`"`+f+`"`), []byte(`"`+t+`"`))
	return bytes.ReplaceAll(data, []byte(f+"/"), []byte(t+"/"))
}
