package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// sessionFile remembers the agent session across runner processes: the
// CLI's plan revisions run as separate tasks that share one state
// directory. A state directory is per task unless a caller shares it on
// purpose, so the file is trusted for any task of the same harness.
type sessionFile struct {
	TaskID    string `json:"task_id"`
	Harness   string `json:"harness"`
	SessionID string `json:"session_id"`
	// Dir is the checkout the session worked in: OpenCode cannot continue
	// a session from another directory (it waits forever), so a session is
	// only reused where it was made.
	Dir string `json:"dir"`
}

const sessionFileName = "agent-session.json"

func (r *run) saveSession() {
	b, _ := json.Marshal(sessionFile{TaskID: r.order.TaskID, Harness: r.h.Name(), SessionID: r.session, Dir: r.dir})
	if err := os.WriteFile(filepath.Join(r.stateDir, sessionFileName), b, 0o600); err != nil {
		r.log.Warn().Err(err).Msg("could not save the agent session id")
	}
}

func (r *run) loadSession() string {
	b, err := os.ReadFile(filepath.Join(r.stateDir, sessionFileName))
	if err != nil {
		return ""
	}
	var s sessionFile
	if json.Unmarshal(b, &s) != nil || s.Harness != r.h.Name() {
		return ""
	}
	if s.Dir != r.dir {
		r.log.Info().Str("session", s.SessionID).Str("made_in", s.Dir).Msg("the saved agent session was made in another checkout; starting a new one")
		return ""
	}
	return s.SessionID
}
