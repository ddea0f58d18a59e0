package harness

import (
	"bytes"
	"encoding/json"
	"os/exec"
)

// SessionPorter is a harness whose agent sessions can leave the sandbox
// they were made in and be resumed in another one (the plan's session in
// the execute sandbox). The runner runs the commands as the agent, so the
// session is read from and written to the agent's own HOME and XDG
// directories with the agent's ownership.
type SessionPorter interface {
	// ExportSession builds the process that prints session id, made in
	// the checkout dir, on stdout.
	ExportSession(env []string, dir, id string) (*exec.Cmd, error)
	// RelocateSession rewrites exported data of session id made in the
	// checkout from so that it resumes in the checkout to. It refuses data
	// that is not an export of that session.
	RelocateSession(data []byte, id, from, to string) ([]byte, error)
	// ImportSession builds the process that stores data (on its stdin)
	// where the CLI finds the sessions of the checkout dir.
	ImportSession(env []string, dir, id string, data []byte) (*exec.Cmd, error)
}

// relocateJSON rewrites the checkout path from to to in JSON text: every
// string that is from, and every path below it. It works on the encoded
// text, so numbers and key order stay exactly as the CLI wrote them.
func relocateJSON(data []byte, from, to string) []byte {
	if from == to || from == "" {
		return data
	}
	f, t := jsonString(from), jsonString(to)
	data = bytes.ReplaceAll(data, []byte(`"`+f+`"`), []byte(`"`+t+`"`))
	return bytes.ReplaceAll(data, []byte(f+"/"), []byte(t+"/"))
}

// jsonString is s as it appears inside a JSON string (no quotes), the way
// JavaScript's JSON.stringify writes it (no HTML escaping).
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b := bytes.TrimSpace(buf.Bytes())
	return string(b[1 : len(b)-1])
}
