package dispatch

// SessionHandoff is the work order's part that carries a plan run's agent
// session to the run that executes the plan. The archive travels inside the
// work order, which only the runner reads, so the agent cannot swap it
// before the runner restores it.
type SessionHandoff struct {
	// FromTask is the plan run the session comes from.
	FromTask string `json:"from_task"`
	// Harness and ID name the session as the plan run recorded it.
	Harness string `json:"harness,omitempty"`
	ID      string `json:"id,omitempty"`
	// Archive is the session archive the plan run left beside its
	// result.json (SessionArchiveFile), at most MaxSessionArchiveBytes;
	// JSON carries it as base64.
	Archive []byte `json:"archive,omitempty"`
	// Missing says why there is no archive (the backend cannot carry
	// one, it was not kept, ...): the runner starts fresh and says so.
	Missing string `json:"missing,omitempty"`
	// RepoID and PlanSHA256 are what the bot expects the archive to be
	// bound to: the repository of this run and the digest of the approved
	// plan as its run wrote it (from the plan comment). An archive bound to
	// anything else, or to nothing, is not resumed.
	RepoID     int64  `json:"repo_id,omitempty"`
	PlanSHA256 string `json:"plan_sha256,omitempty"`
}

// SessionReport is result.json's account of the agent's session.
type SessionReport struct {
	Harness string `json:"harness,omitempty"`
	ID      string `json:"id,omitempty"`
	// Archive (plan mode) is the archive's file name in the output dir,
	// empty when it was not saved; ArchiveBytes its size.
	Archive      string `json:"archive,omitempty"`
	ArchiveBytes int64  `json:"archive_bytes,omitempty"`
	// Resumed (execute mode): the agent continued the plan run's session
	// From; otherwise it started fresh.
	Resumed bool   `json:"resumed"`
	From    string `json:"from,omitempty"`
	// Note is one line for people: "resumed from plan T-…", "fresh: <why>",
	// "saved for the execute run", "not saved: <why>".
	Note string `json:"note"`
}

// SessionArchiveFile is the plan run's session archive in its output dir.
const SessionArchiveFile = "agent-session.tar.gz"

// MaxSessionArchiveBytes caps a session archive (compressed): a larger
// session is not saved and the execute run starts fresh.
const MaxSessionArchiveBytes = 4 << 20
