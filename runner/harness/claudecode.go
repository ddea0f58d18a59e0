package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
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
	// --include-partial-messages adds the API's stream events: the only
	// place a step's final output token count (message_delta) shows up,
	// the assistant lines repeat message_start's placeholder.
	args := []string{"-p", "--output-format=stream-json", "--verbose", "--include-partial-messages"}
	// Values go in the --flag=value form: a value starting with "-" (a
	// model name or session id from elsewhere) must never read as a flag.
	if req.Model != "" {
		args = append(args, "--model="+req.Model)
	}
	if req.SessionID != "" {
		args = append(args, "--resume="+req.SessionID)
	}
	// In print mode nobody answers a permission prompt: whatever would ask
	// is denied at once (--permission-prompts none), and the denial shows
	// up as a stall event instead of a hang.
	if req.ReadOnly {
		// Not --permission-mode plan: its system prompt steers the model to
		// write a plan file and call ExitPlanMode, interactive steps that
		// fail in print mode. Default mode with the edit tools removed lets
		// the model read and run read-only commands; anything that would
		// change the tree needs approval, which is denied.
		args = append(args, "--permission-mode=default",
			"--disallowed-tools=Write,Edit,MultiEdit,NotebookEdit")
	} else {
		// acceptEdits covers the file tools only; the agent must also run
		// builds and tests, and the sandbox is disposable, so Bash is
		// allowed as a whole.
		args = append(args, "--permission-mode=acceptEdits", "--allowed-tools=Bash")
	}
	args = append(args, "--permission-prompts=none")
	if c.MaxTurns > 0 {
		args = append(args, "--max-turns="+strconv.Itoa(c.MaxTurns))
	}
	if c.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd="+strconv.FormatFloat(c.MaxBudgetUSD, 'f', -1, 64))
	}
	if c.MCPConfig != "" {
		args = append(args, "--mcp-config="+c.MCPConfig, "--strict-mcp-config")
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
func (c *ClaudeCode) NewParser() Parser {
	return &claudeParser{
		now:    time.Now,
		open:   map[string]*claudeStep{},
		closed: map[string]bool{},
		tools:  map[string]claudeToolCall{},
	}
}

// claudeParser turns stream-json lines into events.
//
// A step is one API message. Claude Code prints one `assistant` line per
// content block, all with the same message id and message_start's
// placeholder usage; with --include-partial-messages the API's own
// message_start / message_delta / message_stop come around them, and only
// message_delta has the real output count. A tool result can be printed
// before message_delta (a call rejected on sight), so a streamed step ends
// at message_stop and nowhere else. Without stream events (another flag
// set, an older recording) a step ends when its thread moves on: the tool
// results, the next message or the result.
//
// Subagents (parent_tool_use_id set) run their own messages, possibly in
// parallel, so each thread has its own open step.
type claudeParser struct {
	now       func() time.Time
	sessionID string
	open      map[string]*claudeStep    // by thread: parent_tool_use_id, "" for the main agent
	order     []string                  // threads in the order their steps opened
	closed    map[string]bool           // message ids of finished steps
	tools     map[string]claudeToolCall // by tool_use id, to name denied calls
	lastError string                    // text of the last API error message
}

type claudeStep struct {
	id       string
	streamed bool // opened by a message_start stream event
	tokens   Tokens
}

type claudeToolCall struct {
	name  string
	input string
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// tokens maps the API's usage. Thinking tokens are part of output_tokens
// (and billed as output); Reasoning repeats them for the receipt.
func (u *claudeUsage) tokens() Tokens {
	if u == nil {
		return Tokens{}
	}
	t := Tokens{
		Input:      u.InputTokens,
		Output:     u.OutputTokens,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
	if u.OutputTokensDetails != nil {
		t.Reasoning = u.OutputTokensDetails.ThinkingTokens
	}
	return t
}

type claudeBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// claudeMessage is the `message` of assistant and user lines.
type claudeMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *claudeUsage    `json:"usage"`
}

// The line shapes, one per type. Each line is decoded twice, once for its
// type and once for its shape, so that a field one type uses differently
// from another (`message` is an object on assistant lines and a string on
// system ones) never breaks a line the parser reads.
type (
	claudeHead struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	claudeSystemInit struct {
		SessionID string `json:"session_id"`
		Model     string `json:"model"`
	}
	claudeDenied struct {
		ToolName       string `json:"tool_name"`
		ToolUseID      string `json:"tool_use_id"`
		DecisionReason string `json:"decision_reason"`
	}
	claudeStreamEvent struct {
		SessionID       string  `json:"session_id"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		Event           *struct {
			Type    string `json:"type"`
			Message *struct {
				ID    string       `json:"id"`
				Usage *claudeUsage `json:"usage"`
			} `json:"message"`
			Usage *claudeUsage `json:"usage"`
		} `json:"event"`
	}
	claudeChat struct { // assistant and user lines
		SessionID       string         `json:"session_id"`
		ParentToolUseID *string        `json:"parent_tool_use_id"`
		Message         *claudeMessage `json:"message"`
		// A message the CLI made up to report an API failure.
		IsAPIErrorMessage bool   `json:"is_api_error_message"`
		Error             string `json:"error"`
	}
	claudeResult struct {
		Subtype      string          `json:"subtype"`
		SessionID    string          `json:"session_id"`
		IsError      bool            `json:"is_error"`
		Result       string          `json:"result"`
		TotalCostUSD *float64        `json:"total_cost_usd"`
		Usage        *claudeUsage    `json:"usage"`
		Errors       json.RawMessage `json:"errors"`
		// Per model, this invocation only; total_cost_usd is the
		// session's, which on --resume includes the earlier runs.
		SinceLast map[string]struct {
			CostUSD float64 `json:"costUSD"`
		} `json:"model_usage_since_last_result"`
	}
)

func claudeThread(parent *string) string {
	if parent == nil {
		return ""
	}
	return *parent
}

// ParseStdout implements Parser.
func (p *claudeParser) ParseStdout(line []byte) ([]Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	var head claudeHead
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("claude-code: bad stream-json line %q: %w", claudeClip(line, 120), err)
	}
	if head.Type == "" {
		return nil, fmt.Errorf("claude-code: stream-json line without a type: %q", claudeClip(line, 120))
	}
	now := p.now()
	var (
		evs []Event
		err error
	)
	switch head.Type {
	case "system":
		evs, err = p.system(head.Subtype, line, now)
	case "stream_event":
		evs, err = p.streamEvent(line, now)
	case "assistant":
		evs, err = p.assistant(line, now)
	case "user":
		evs, err = p.user(line, now)
	case "result":
		evs, err = p.result(line, now)
	default:
		return nil, nil // rate_limit_event, tool_progress, ...: not ours
	}
	if err != nil {
		return nil, fmt.Errorf("claude-code: %s line %q: %w", head.Type, claudeClip(line, 120), err)
	}
	return evs, nil
}

func (p *claudeParser) system(subtype string, line []byte, now time.Time) ([]Event, error) {
	switch subtype {
	case "init":
		var l claudeSystemInit
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, err
		}
		if l.SessionID == "" {
			return nil, errors.New("init without session_id")
		}
		p.sessionID = l.SessionID
		return []Event{{Type: EventSession, Time: now, SessionID: l.SessionID, Text: l.Model}}, nil
	case "permission_denied":
		// Print mode has nobody to approve a call: it is refused at once
		// and the agent goes on without it. The runner counts these.
		var l claudeDenied
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, err
		}
		call := p.tools[l.ToolUseID]
		name := l.ToolName
		if name == "" {
			name = call.name
		}
		text := name + " denied"
		if call.input != "" {
			text += " " + claudeClip([]byte(call.input), 200)
		}
		if l.DecisionReason != "" {
			text += ": " + l.DecisionReason
		}
		return []Event{{Type: EventStall, Time: now, SessionID: p.sessionID, Tool: name, ToolInput: call.input, Text: text}}, nil
	default:
		return nil, nil // status, compact_boundary, hook lines: not events
	}
}

func (p *claudeParser) streamEvent(line []byte, now time.Time) ([]Event, error) {
	var l claudeStreamEvent
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	if l.Event == nil {
		return nil, errors.New("no event")
	}
	p.noteSession(l.SessionID)
	th := claudeThread(l.ParentToolUseID)
	switch l.Event.Type {
	case "message_start":
		m := l.Event.Message
		if m == nil || m.ID == "" {
			return nil, errors.New("message_start without a message id")
		}
		evs := p.startStep(th, m.ID, now)
		if s := p.open[th]; s != nil && s.id == m.ID {
			s.streamed = true
			s.tokens = claudeMaxTokens(s.tokens, m.Usage.tokens())
		}
		return evs, nil
	case "message_delta":
		if s := p.open[th]; s != nil {
			s.tokens = claudeMaxTokens(s.tokens, l.Event.Usage.tokens())
		}
		return nil, nil
	case "message_stop":
		return p.closeStep(th, now), nil
	default:
		return nil, nil // content blocks: the assistant lines carry them whole
	}
}

// startStep opens a step for message id on thread th, closing the one that
// was open there, unless id is the open step or one already finished.
func (p *claudeParser) startStep(th, id string, now time.Time) []Event {
	if s := p.open[th]; s != nil && s.id == id && id != "" {
		return nil
	}
	if id != "" && p.closed[id] {
		return nil
	}
	evs := p.closeStep(th, now)
	p.open[th] = &claudeStep{id: id}
	p.order = append(p.order, th)
	return append(evs, Event{Type: EventStepStart, Time: now, SessionID: p.sessionID})
}

func (p *claudeParser) closeStep(th string, now time.Time) []Event {
	s := p.open[th]
	if s == nil {
		return nil
	}
	delete(p.open, th)
	for i, o := range p.order {
		if o == th {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	if s.id != "" {
		p.closed[s.id] = true
	}
	return []Event{{Type: EventStepFinish, Time: now, SessionID: p.sessionID, Tokens: s.tokens}}
}

func (p *claudeParser) noteSession(id string) {
	if id != "" {
		p.sessionID = id
	}
}

func (p *claudeParser) assistant(line []byte, now time.Time) ([]Event, error) {
	var l claudeChat
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	if l.Message == nil {
		return nil, errors.New("no message")
	}
	var blocks []claudeBlock
	if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
		return nil, fmt.Errorf("message %q: content is not a list of blocks: %w", l.Message.ID, err)
	}
	p.noteSession(l.SessionID)
	if l.Message.Model == "<synthetic>" {
		return p.synthetic(&l, blocks, now), nil
	}
	th := claudeThread(l.ParentToolUseID)
	evs := p.startStep(th, l.Message.ID, now)
	if s := p.open[th]; s != nil && s.id == l.Message.ID {
		s.tokens = claudeMaxTokens(s.tokens, l.Message.Usage.tokens())
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) == "" {
				continue
			}
			evs = append(evs, Event{Type: EventText, Time: now, SessionID: p.sessionID, Text: b.Text})
		case "tool_use":
			input := claudeCompactJSON(b.Input)
			if b.ID != "" {
				p.tools[b.ID] = claudeToolCall{name: b.Name, input: input}
			}
			evs = append(evs, Event{Type: EventToolUse, Time: now, SessionID: p.sessionID, Tool: b.Name, ToolInput: input})
		}
	}
	if l.Message.ID == "" {
		// Nothing ties a message without id to its other lines.
		evs = append(evs, p.closeStep(th, now)...)
	}
	return evs, nil
}

// synthetic handles a message no model wrote: the CLI's report of an API
// failure (an error), or a filler it adds to the transcript (text). It is
// not a step: it cost nothing and took no turn.
func (p *claudeParser) synthetic(l *claudeChat, blocks []claudeBlock, now time.Time) []Event {
	var evs []Event
	for _, b := range blocks {
		if b.Type != "text" || strings.TrimSpace(b.Text) == "" {
			continue
		}
		if l.IsAPIErrorMessage {
			p.lastError = b.Text
			evs = append(evs, Event{Type: EventError, Time: now, SessionID: p.sessionID, Text: b.Text})
		} else {
			evs = append(evs, Event{Type: EventText, Time: now, SessionID: p.sessionID, Text: b.Text})
		}
	}
	return evs
}

// user lines carry tool results back to the model. An unstreamed step is
// over once its results are back, and so is a subagent whose Agent call
// got its result.
func (p *claudeParser) user(line []byte, now time.Time) ([]Event, error) {
	var l claudeChat
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	if l.Message == nil {
		return nil, errors.New("no message")
	}
	p.noteSession(l.SessionID)
	var evs []Event
	th := claudeThread(l.ParentToolUseID)
	if s := p.open[th]; s != nil && !s.streamed {
		evs = p.closeStep(th, now)
	}
	var blocks []claudeBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return evs, nil // a plain string: a prompt (a subagent's task)
	}
	for _, b := range blocks {
		if b.Type == "tool_result" && b.ToolUseID != "" {
			evs = append(evs, p.closeStep(b.ToolUseID, now)...)
			delete(p.tools, b.ToolUseID)
		}
	}
	return evs, nil
}

func (p *claudeParser) result(line []byte, now time.Time) ([]Event, error) {
	var l claudeResult
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	p.noteSession(l.SessionID)
	var evs []Event
	for len(p.order) > 0 {
		evs = append(evs, p.closeStep(p.order[0], now)...)
	}
	if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
		// An API failure was reported already, from its own message.
		if msg := claudeResultError(&l); msg != p.lastError {
			evs = append(evs, Event{Type: EventError, Time: now, SessionID: p.sessionID, Text: msg})
		}
	}
	// The cost is this invocation's, so that a runner adding up a run and
	// its resumed repair counts each dollar once. For a new session it is
	// total_cost_usd.
	ev := Event{Type: EventResult, Time: now, SessionID: p.sessionID, Text: l.Result,
		Tokens: l.Usage.tokens(), CostIsTotal: true}
	switch {
	case len(l.SinceLast) > 0:
		// Summed in a fixed order: float addition is not associative.
		for _, model := range slices.Sorted(maps.Keys(l.SinceLast)) {
			ev.CostUSD += l.SinceLast[model].CostUSD
		}
	case l.TotalCostUSD != nil:
		ev.CostUSD = *l.TotalCostUSD
	}
	return append(evs, ev), nil
}

// claudeResultError says why a run failed: the subtype (error_max_turns,
// error_during_execution, ...) and the CLI's messages.
func claudeResultError(l *claudeResult) string {
	msg := l.Result
	var list []string
	if json.Unmarshal(l.Errors, &list) == nil && len(list) > 0 {
		msg = strings.Join(list, "; ")
	} else if len(l.Errors) > 0 && string(l.Errors) != "null" && string(l.Errors) != "[]" {
		msg = claudeCompactJSON(l.Errors)
	}
	switch {
	case msg == "":
		return "claude-code finished with " + l.Subtype
	case l.Subtype != "" && l.Subtype != "success":
		return l.Subtype + ": " + msg
	default:
		return msg
	}
}

// ParseStderr implements Parser. Claude Code reports failures in the
// result line and denials as system lines on stdout; stderr carries only
// start-up problems (a bad flag, no API key), which the runner keeps with
// the exit status.
func (p *claudeParser) ParseStderr(line []byte) []Event {
	return nil
}

// claudeMaxTokens keeps the larger of each count: message_start reports a
// placeholder output count that message_delta raises.
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
