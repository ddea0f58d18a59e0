package runner

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
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

// sessions keep the agent's sessions: the id across runner processes
// (session.go) and the plan's session carried to the execute run
// (sessioncarry.go). A value of its own, built from the harness, where the
// agent works, and as whom the copies run.
type sessions struct {
	h harness.Harness
	// dir is the agent's checkout, stateDir the runner's state.
	dir, stateDir string
	// env is the agent's environment; environ the runner's, whose
	// credentials a session must not hold.
	env, environ []string
	agent        *AgentUser
	taskID       string
	red          *Redactor
	log          zerolog.Logger
}

// save remembers id as the agent's session in this checkout.
func (s *sessions) save(id string) {
	b, _ := json.Marshal(sessionFile{TaskID: s.taskID, Harness: s.h.Name(), SessionID: id, Dir: s.dir})
	if err := os.WriteFile(filepath.Join(s.stateDir, sessionFileName), b, 0o600); err != nil {
		s.log.Warn().Err(err).Msg("could not save the agent session id")
	}
}

// load is the session an earlier runner process of the same harness left
// in this checkout; "" when there is none.
func (s *sessions) load() string {
	b, err := os.ReadFile(filepath.Join(s.stateDir, sessionFileName))
	if err != nil {
		return ""
	}
	var f sessionFile
	if json.Unmarshal(b, &f) != nil || f.Harness != s.h.Name() {
		return ""
	}
	if f.Dir != s.dir {
		s.log.Info().Str("session", f.SessionID).Str("made_in", f.Dir).Msg("the saved agent session was made in another checkout; starting a new one")
		return ""
	}
	return f.SessionID
}
