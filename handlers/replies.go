package handlers

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// The data each github/*.tmpl reply is rendered with. An operator who
// overrides a template can use exactly these fields.

// AckData is github/ack: a run was started.
type AckData struct {
	TaskID  string
	Mode    dispatch.Mode
	Branch  string
	Budget  float64
	Harness string
	Issue   int
	Round   int
	Attempt int
	HasPlan bool
	// IssueAuthorExcluded is the issue's author when they cannot write to
	// the repository: their title and body were left out.
	IssueAuthorExcluded string
	// ReportWithheld says why such an issue was left out although the
	// configuration quotes reports a writer vouched for: none vouched for
	// its text as it is now (it was edited since), or its rendering could
	// not be read.
	ReportWithheld string
	// Excluded are commenters without write access whose text was left out.
	Excluded []string
	// LiveURL is the run's live page, when the bot serves one.
	LiveURL string
	Marker  string
	// Report is what the agent was given of an issue by someone without
	// write access, which a writer vouched for (tasktext.go).
	Report *ReportAck
	// CI names the failing checks a CI fix run fixes (ci.go).
	CI *CIAck
}

// ReportAck says what of an outsider's issue went to the agent.
type ReportAck struct {
	Author    string
	VouchedBy string
	// Passed says what was passed ("the title and 1,234 characters of the
	// body"); Removed what hidden content was taken out first.
	Passed  string
	Removed []string
}

// CIAck is the acknowledgement's account of a CI fix run.
type CIAck struct {
	Head     string
	Checks   []string
	Attempt  int
	Attempts int
}

// ConfigErrorData is github/config_error: the resolved configuration
// cannot be used.
type ConfigErrorData struct {
	// Source is where it was read (repository or org default).
	Source string
	Error  string
	File   string
}

// RefusalData is github/refusal: someone without write access tried to
// drive the bot.
type RefusalData struct {
	User string
	// Action completes "Only people with write access ... can <Action>".
	Action string
}

// BusyData is github/busy: a run holds the issue.
type BusyData struct {
	Holder string
	// HolderMode is the running task's mode, when the bot's own
	// acknowledgement says it; empty otherwise.
	HolderMode dispatch.Mode
	// Mode is the run that was asked for and not started.
	Mode dispatch.Mode
	// Command is the command that asked for it ("" for a label or a push).
	Command string
}

// CommandErrorData is github/command_error: a comment that is almost a
// command.
type CommandErrorData struct {
	Error string
	// Commands are the commands that apply where the comment was typed.
	Commands []string
	OnPR     bool
	// State is the issue's state label (agent:planning, ...), "" for none,
	// so the reply can say what makes sense now.
	State string
}

// TableReplyData is the data of every reply the tables choose by name (a
// reply("…") cell in handlers/lifecycle/table.go, wrong_place included):
// github/no_plan, plan_in_progress, max_rounds, no_earlier_run,
// nothing_to_continue, nothing_to_abort, wrong_place, mention_other_pr.
// It is one type, filled with all it holds whichever reply it is, so a
// new reply is its template and its cell: no type, sample or case to add
// (TestANewTableReplyIsItsTemplate).
type TableReplyData struct {
	// Command is the command typed ("" for a mention).
	Command string
	// OnPR is where it was typed; NotAgentPR: on a pull request this App
	// did not open.
	OnPR       bool
	NotAgentPR bool
	// Commands are the commands that apply where it was typed, with their
	// help (none on a pull request the App did not open).
	Commands []string
	// State is the issue's state label (agent:planning, ...), "" for none.
	State string
	// TaskID is the run holding the issue, and Round its plan round (1
	// when it says none); TaskID is "" when no run holds it.
	TaskID string
	Round  int
	// Mode is the mode of the last run on the issue or PR ("" for none).
	Mode dispatch.Mode
	// MaxRounds is the server's last plan round (SANDBOX_MAX_PLAN_ROUNDS).
	MaxRounds    int
	TriggerLabel string
	// Slug is the App's, as people mention it.
	Slug string
}

// OverCeilingData is github/over_ceiling: a one-off flag asks for more
// than the operator's ceiling.
type OverCeilingData struct {
	Command string
	Flag    string
	Asked   string
	Ceiling string
	// Within is the flag value at the ceiling, for the example.
	Within string
	// Setting is the server configuration key that raises the ceiling.
	Setting string
}

// BranchUpdatedData is github/branch_updated: /rebase done through the
// API without a sandbox.
type BranchUpdatedData struct {
	Base string
}
