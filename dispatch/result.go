package dispatch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
)

// ResultVersion is bumped on any incompatible change of Result.
const ResultVersion = 1

// ResultFile is the name of the receipt in the run's output directory.
const ResultFile = "result.json"

// Status is how a run ended.
type Status string

// The statuses a run can end with.
const (
	StatusCompleted      Status = "completed"
	StatusFailed         Status = "failed"
	StatusInterrupted    Status = "interrupted"
	StatusTimeout        Status = "timeout"
	StatusBudgetExceeded Status = "budget_exceeded"
	StatusHung           Status = "hung"
)

// Result is result.json: what the runner leaves for the bot. The bot reads it
// after the run ends; the sandbox never calls the bot.
type Result struct {
	SchemaVersion   int     `json:"schema_version"`
	TaskID          string  `json:"task_id"`
	Mode            Mode    `json:"mode"`
	Status          Status  `json:"status"`
	DurationSeconds float64 `json:"duration_seconds"`

	Branch    string    `json:"branch,omitempty"`
	HeadSHA   string    `json:"head_sha,omitempty"`
	Commits   []Commit  `json:"commits"`
	DiffStats DiffStats `json:"diff_stats"`

	Plan      string `json:"plan,omitempty"`
	PRSummary string `json:"pr_summary,omitempty"`
	// PRReview is a review run's review: the agent's final message, whose
	// "path:line: text" lines the bot posts on those lines of the diff.
	PRReview string `json:"pr_review,omitempty"`
	// PRPatch is a suggest run's change, as a unified diff (one line of
	// context) from the pull request's head, which the bot posts as
	// suggested changes.
	PRPatch string `json:"pr_patch,omitempty"`

	Validation []CheckResult `json:"validation"`
	Repairs    []Repair      `json:"repairs"`
	TokenUsage TokenUsage    `json:"token_usage"`

	ScreenshotPaths []string `json:"screenshot_paths"`
	RecordingPaths  []string `json:"recording_paths"`
	MediaCommit     string   `json:"media_commit,omitempty"`
	// MediaOmitted says what media was left out of the media commit and
	// why (a size cap), one line each.
	MediaOmitted []string `json:"media_omitted,omitempty"`
	// MediaError says why no screenshots were taken of a project that
	// asks for them (dev.routes): Chromium missing, the dev server not
	// coming up, a capture that failed. Empty when they were taken, or
	// not asked for.
	MediaError string `json:"media_error,omitempty"`
	// Tools counts the agent's tool calls over the run by the name its
	// CLI reports (bash, browser_take_snapshot, mcp__browser__click, ...).
	Tools map[string]int `json:"tools,omitempty"`
	// Artifacts are task-mode outputs, relative to the output dir.
	Artifacts []string `json:"artifacts,omitempty"`
	// Session says what became of the agent's session: saved for the
	// execute run (plan mode), resumed or started fresh (execute).
	Session *SessionReport `json:"session,omitempty"`
	// Setup says what became of lifecycle.setup: it ran, or the setup
	// cache stood in for it, and what the cache did (setupcache.go).
	Setup *SetupReport `json:"setup,omitempty"`
	// Timings are the run's stages, from the sandbox's start to the end.
	Timings *Timings `json:"timings,omitempty"`
	// Images says how many of the work order's images the agent was
	// given (none when it carried none).
	Images *ImagesReport `json:"images,omitempty"`

	// The checks before the pull request (prchecks.go).
	// SecretScan is the scan of the commits the runner pushed or held.
	SecretScan *SecretScan `json:"secret_scan,omitempty"`
	// Dependencies are the dependencies the change adds, removes or
	// changes, with known advisories for the new versions.
	Dependencies *Dependencies `json:"dependencies,omitempty"`
	// PlanFiles are the files and areas a plan run's plan names (plan
	// mode): the bot keeps them with the plan and hands them to the runs
	// that implement it.
	PlanFiles []PlanFile `json:"plan_files,omitempty"`
	// PlanScope compares the change with the approved plan's files.
	PlanScope *PlanScope `json:"plan_scope,omitempty"`
	// Review is the opt-in reviewer's pass.
	Review *Review `json:"review,omitempty"`

	Error *RunError `json:"error,omitempty"`
}

// Commit is one commit the run pushed.
type Commit struct {
	SHA     string `json:"sha"`
	Message string `json:"message"`
}

// DiffStats summarises the change against the base branch.
type DiffStats struct {
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
}

// CheckResult is one validate check after repairs.
type CheckResult struct {
	Name            string  `json:"name"`
	Command         string  `json:"command"`
	Passed          bool    `json:"passed"`
	Attempts        int     `json:"attempts"`
	DurationSeconds float64 `json:"duration_seconds"`
	OutputTail      string  `json:"output_tail,omitempty"`
}

// Repair is one repair round.
type Repair struct {
	Attempt      int      `json:"attempt"`
	FailedChecks []string `json:"failed_checks"`
	CostUSD      float64  `json:"cost_usd"`
	Fixed        bool     `json:"fixed"`
}

// TokenUsage is what the agent consumed over the whole run.
type TokenUsage struct {
	Input        int64   `json:"input"`
	Output       int64   `json:"output"`
	Reasoning    int64   `json:"reasoning"`
	CacheRead    int64   `json:"cache_read"`
	CacheWrite   int64   `json:"cache_write"`
	TotalCostUSD float64 `json:"total_cost_usd"`
	Steps        int     `json:"steps"`
}

// Add accumulates u into t.
func (t *TokenUsage) Add(u TokenUsage) {
	t.Input += u.Input
	t.Output += u.Output
	t.Reasoning += u.Reasoning
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
	t.TotalCostUSD += u.TotalCostUSD
	t.Steps += u.Steps
}

// RunError says why a run did not complete, with the watchdog's diagnostic
// when it was the watchdog or the budget guard that stopped it.
type RunError struct {
	Message    string      `json:"message"`
	Diagnostic *Diagnostic `json:"diagnostic,omitempty"`
}

// Diagnostic is the state of the agent when it was stopped.
type Diagnostic struct {
	LastEventType  string    `json:"last_event_type"`
	LastEventAt    time.Time `json:"last_event_at"`
	CurrentStep    int       `json:"current_step"`
	CompletedSteps int       `json:"completed_steps"`
	CostSoFarUSD   float64   `json:"cost_so_far_usd"`
	IdleSeconds    float64   `json:"idle_seconds,omitempty"`
}

// CleanText strips terminal escapes and control characters from every
// text of the receipt that a program printed or an agent wrote: the runner
// before it writes result.json, and the bot again when it reads one (a
// hostile sandbox writes what it likes), so no escape reaches GitHub, a
// receipt or the dashboard.
func (r *Result) CleanText() {
	for _, p := range []*string{&r.Plan, &r.PRSummary, &r.PRReview, &r.PRPatch, &r.MediaError} {
		*p = termtext.Clean(*p)
	}
	for i := range r.Commits {
		r.Commits[i].Message = termtext.Clean(r.Commits[i].Message)
	}
	for i := range r.Validation {
		v := &r.Validation[i]
		v.Name, v.Command, v.OutputTail = termtext.Clean(v.Name), termtext.Clean(v.Command), termtext.Clean(v.OutputTail)
	}
	for i := range r.Repairs {
		cleanAll(r.Repairs[i].FailedChecks)
	}
	cleanAll(r.MediaOmitted)
	cleanAll(r.ScreenshotPaths)
	cleanAll(r.RecordingPaths)
	cleanAll(r.Artifacts)
	r.cleanChecks()
	if s := r.Session; s != nil {
		s.Harness, s.ID, s.Note = termtext.Clean(s.Harness), termtext.Clean(s.ID), termtext.Clean(s.Note)
	}
	if e := r.Error; e != nil {
		e.Message = termtext.Clean(e.Message)
		if d := e.Diagnostic; d != nil {
			d.LastEventType = termtext.Clean(d.LastEventType)
		}
	}
}

func cleanAll(texts []string) {
	for i, t := range texts {
		texts[i] = termtext.Clean(t)
	}
}

// WriteResult writes result.json atomically (temp file + rename), so a
// reader never sees half a receipt even if the sandbox is killed mid-write.
func WriteResult(dir string, r *Result) error {
	r.SchemaVersion = ResultVersion
	r.CleanText()
	if r.Commits == nil {
		r.Commits = []Commit{}
	}
	if r.Validation == nil {
		r.Validation = []CheckResult{}
	}
	if r.Repairs == nil {
		r.Repairs = []Repair{}
	}
	if r.ScreenshotPaths == nil {
		r.ScreenshotPaths = []string{}
	}
	if r.RecordingPaths == nil {
		r.RecordingPaths = []string{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".result-*.json")
	if err != nil {
		return fmt.Errorf("write result in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write result in %s: %w", dir, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync result in %s: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close result in %s: %w", dir, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, ResultFile))
}

// Progress is one line the runner prints on stdout per meaningful step: a
// bare JSON object with "event":"progress", so it stays readable in any log
// viewer. The bot follows the run's log and turns these into a Check Run.
type Progress struct {
	Event     string    `json:"event"` // always "progress"
	Time      time.Time `json:"time"`
	TaskID    string    `json:"task_id"`
	Stage     string    `json:"stage"` // clone, setup, agent, validate, repair, media, push, done
	Message   string    `json:"message"`
	Step      int       `json:"step,omitempty"`
	ToolCalls int       `json:"tool_calls,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Tokens    int64     `json:"tokens,omitempty"`
	CostUSD   float64   `json:"cost_usd,omitempty"`
	Status    Status    `json:"status,omitempty"` // set on the final line
	// Branch and HeadSHA are set once the runner has pushed, so the bot
	// can hang its check run on the commit.
	Branch  string `json:"branch,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	// Kind and Detail are what the run's live page shows of the agent's
	// steps: a tool call (Tool, Detail its arguments, shortened), the
	// agent's text, or a check's output tail. Both are optional, and the
	// runner redacts Detail as it redacts Message.
	Kind   ProgressKind `json:"kind,omitempty"`
	Detail string       `json:"detail,omitempty"`
}

// ProgressKind says what a progress line's Detail holds.
type ProgressKind string

// The kinds of progress lines with a detail.
const (
	KindTool  ProgressKind = "tool"  // Detail: the call's arguments, shortened
	KindText  ProgressKind = "text"  // Detail: what the agent wrote
	KindCheck ProgressKind = "check" // Detail: the check's output tail
)

// Limits of a progress line's Detail, so a chatty agent's page and log
// stay bounded: arguments are shortened harder than text.
const (
	MaxToolDetail = 200
	MaxTextDetail = 1200
)

// ParseProgress returns the progress event on a log line, or false when the
// line is something else (the runner's own logs, a tool's output).
func ParseProgress(line []byte) (Progress, bool) {
	if len(line) == 0 || line[0] != '{' {
		return Progress{}, false
	}
	var p Progress
	if err := json.Unmarshal(line, &p); err != nil || p.Event != "progress" {
		return Progress{}, false
	}
	p.Stage, p.Message, p.Tool = termtext.Clean(p.Stage), termtext.Clean(p.Message), termtext.Clean(p.Tool)
	p.Detail = termtext.Clean(p.Detail)
	return p, true
}
