package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ClaudeCode runs Anthropic's Claude Code CLI in print mode and reads its
// stream-json output (`claude -p --output-format stream-json --verbose`).
type ClaudeCode struct {
	bin string

	// MaxTurns bounds the agentic turns of one invocation (--max-turns);
	// zero leaves the CLI's default.
	MaxTurns int
	// MaxBudgetUSD makes the CLI stop by itself once its own cost estimate
	// passes the amount (--max-budget-usd). The runner's budget guard still
	// applies; this one also works between two result events. Zero is off.
	MaxBudgetUSD float64
	// MCPConfig is a path to (or the JSON text of) an MCP servers file
	// (--mcp-config). Only those servers load (--strict-mcp-config), so
	// nothing in the repo or the home directory adds more.
	MCPConfig string
}

// NewClaudeCode returns the harness for the claude binary at bin.
func NewClaudeCode(bin string) *ClaudeCode { return &ClaudeCode{bin: bin} }

// Name implements Harness.
func (c *ClaudeCode) Name() string { return "claude-code" }

// claudeOfflineEnv keeps the CLI from calling home: no auto-update, no
// telemetry or error reports, no non-essential traffic. A value the caller
// already put in Request.Env wins.
func claudeOfflineEnv() []string {
	return []string{
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
		"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
	}
}

// Command implements Harness. The prompt goes on stdin: prompts carry the
// whole issue and plan, and argv has a size limit that stdin does not.
func (c *ClaudeCode) Command(req Request) (*exec.Cmd, error) {
	if c.bin == "" {
		return nil, errors.New("claude-code harness: no claude binary configured")
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, errors.New("claude-code harness: empty prompt")
	}
	if req.Dir == "" {
		return nil, errors.New("claude-code harness: no working directory")
	}
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.SessionID != "" {
		args = append(args, "--resume", req.SessionID)
	}
	if req.ReadOnly {
		// Plan mode lets the agent read and think but not change files;
		// the deny list is a second fence in case plan mode lets a tool by.
		args = append(args, "--permission-mode", "plan",
			"--disallowed-tools", "Write,Edit,MultiEdit,NotebookEdit")
	} else {
		args = append(args, "--permission-mode", "acceptEdits")
	}
	if c.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(c.MaxTurns))
	}
	if c.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd", strconv.FormatFloat(c.MaxBudgetUSD, 'f', -1, 64))
	}
	if c.MCPConfig != "" {
		args = append(args, "--mcp-config", c.MCPConfig, "--strict-mcp-config")
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = req.Dir
	cmd.Env = claudeEnvDefaults(req.Env, claudeOfflineEnv())
	cmd.Stdin = strings.NewReader(req.Prompt)
	return cmd, nil
}

// claudeEnvDefaults appends each KEY=VALUE of defs whose key env does not set.
func claudeEnvDefaults(env, defs []string) []string {
	out := append([]string(nil), env...)
	for _, d := range defs {
		key := d[:strings.IndexByte(d, '=')+1]
		set := false
		for _, e := range env {
			if strings.HasPrefix(e, key) {
				set = true
				break
			}
		}
		if !set {
			out = append(out, d)
		}
	}
	return out
}

// NewParser implements Harness.
func (c *ClaudeCode) NewParser() Parser { return &claudeParser{now: time.Now} }

// claudeParser keeps the step that is open: Claude Code prints one
// `assistant` line per content block, all carrying the same message id and
// usage, so a step is a message id, and it closes when something else
// follows (the tool results, the next message, the result).
type claudeParser struct {
	now       func() time.Time
	sessionID string
	stepID    string // message id of the open step; "" when none
	stepTok   Tokens
}

// claudeLine is the union of the stream-json line types this parser reads.
type claudeLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// system/init
	Model string `json:"model"`

	// assistant, user
	Message *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
		Usage   *claudeUsage    `json:"usage"`
	} `json:"message"`

	// result
	IsError      bool         `json:"is_error"`
	Result       string       `json:"result"`
	TotalCostUSD *float64     `json:"total_cost_usd"`
	NumTurns     int          `json:"num_turns"`
	Usage        *claudeUsage `json:"usage"`
	Errors       []string     `json:"errors"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

func (u *claudeUsage) tokens() Tokens {
	if u == nil {
		return Tokens{}
	}
	return Tokens{
		Input:      u.InputTokens,
		Output:     u.OutputTokens,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
}

type claudeBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

func (p *claudeParser) ParseStdout(line []byte) ([]Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	var l claudeLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("claude-code: bad stream-json line %q: %w", claudeClip(line, 120), err)
	}
	if l.Type == "" {
		return nil, fmt.Errorf("claude-code: stream-json line without a type: %q", claudeClip(line, 120))
	}
	now := p.now()
	switch l.Type {
	case "system":
		if l.Subtype != "init" {
			return nil, nil
		}
		if l.SessionID == "" {
			return nil, fmt.Errorf("claude-code: system init without session_id: %q", claudeClip(line, 120))
		}
		p.sessionID = l.SessionID
		return []Event{{Type: EventSession, Time: now, SessionID: l.SessionID, Text: l.Model}}, nil
	case "assistant":
		return p.assistant(&l, line, now)
	case "user":
		if l.Message == nil {
			return nil, fmt.Errorf("claude-code: user line without message: %q", claudeClip(line, 120))
		}
		return p.closeStep(now), nil
	case "result":
		return p.result(&l, line, now)
	default:
		return nil, nil
	}
}

func (p *claudeParser) assistant(l *claudeLine, line []byte, now time.Time) ([]Event, error) {
	if l.Message == nil {
		return nil, fmt.Errorf("claude-code: assistant line without message: %q", claudeClip(line, 120))
	}
	var blocks []claudeBlock
	if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
		return nil, fmt.Errorf("claude-code: assistant message %s: bad content: %w", l.Message.ID, err)
	}
	var evs []Event
	if l.Message.ID == "" || l.Message.ID != p.stepID {
		evs = append(evs, p.closeStep(now)...)
		p.stepID = l.Message.ID
		if p.stepID == "" {
			// Without an id every line is its own step.
			p.stepID = "\x00anon"
		}
		evs = append(evs, Event{Type: EventStepStart, Time: now, SessionID: p.session(l)})
	}
	p.stepTok = claudeMaxTokens(p.stepTok, l.Message.Usage.tokens())
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) == "" {
				continue
			}
			evs = append(evs, Event{Type: EventText, Time: now, SessionID: p.session(l), Text: b.Text})
		case "tool_use":
			evs = append(evs, Event{Type: EventToolUse, Time: now, SessionID: p.session(l),
				Tool: b.Name, ToolInput: claudeCompactJSON(b.Input)})
		}
	}
	if l.Message.ID == "" {
		evs = append(evs, p.closeStep(now)...)
	}
	return evs, nil
}

func (p *claudeParser) result(l *claudeLine, line []byte, now time.Time) ([]Event, error) {
	evs := p.closeStep(now)
	if l.SessionID != "" {
		p.sessionID = l.SessionID
	}
	if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
		msg := l.Result
		if len(l.Errors) > 0 {
			msg = strings.Join(l.Errors, "; ")
		}
		if msg == "" {
			msg = "claude-code finished with " + l.Subtype
		} else if l.Subtype != "" && l.Subtype != "success" {
			msg = l.Subtype + ": " + msg
		}
		evs = append(evs, Event{Type: EventError, Time: now, SessionID: p.sessionID, Text: msg})
	}
	ev := Event{Type: EventResult, Time: now, SessionID: p.sessionID, Text: l.Result,
		Tokens: l.Usage.tokens(), CostIsTotal: true}
	if l.TotalCostUSD != nil {
		ev.CostUSD = *l.TotalCostUSD
	}
	return append(evs, ev), nil
}

func (p *claudeParser) closeStep(now time.Time) []Event {
	if p.stepID == "" {
		return nil
	}
	ev := Event{Type: EventStepFinish, Time: now, SessionID: p.sessionID, Tokens: p.stepTok}
	p.stepID, p.stepTok = "", Tokens{}
	return []Event{ev}
}

func (p *claudeParser) session(l *claudeLine) string {
	if l.SessionID != "" {
		return l.SessionID
	}
	return p.sessionID
}

// ParseStderr implements Parser. Claude Code reports its failures in the
// result line; stderr carries start-up problems only.
func (p *claudeParser) ParseStderr(line []byte) []Event {
	return nil
}

// claudeMaxTokens keeps the larger of each count: the lines of one message repeat
// its usage, and a later line may carry a more complete output count.
func claudeMaxTokens(a, b Tokens) Tokens {
	return Tokens{
		Input:      max(a.Input, b.Input),
		Output:     max(a.Output, b.Output),
		Reasoning:  max(a.Reasoning, b.Reasoning),
		CacheRead:  max(a.CacheRead, b.CacheRead),
		CacheWrite: max(a.CacheWrite, b.CacheWrite),
	}
}

func claudeCompactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func claudeClip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

var _ Harness = (*ClaudeCode)(nil)
