package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"
)

// ClaudeCode runs Anthropic's Claude Code CLI in print mode and reads its
// stream-json output (`claude -p --output-format stream-json --verbose`).
type ClaudeCode struct {
	bin string

	// MaxTurns bounds the agentic turns of one invocation (--max-turns);
	// zero leaves the CLI's default.
	MaxTurns int
	// MaxBudgetUSD makes the CLI stop by itself once its cost passes the
	// amount (--max-budget-usd; the result is then error_max_budget_usd).
	// Claude Code reports cost only in its final result event, so the
	// runner's budget guard cannot stop it mid-run: set this to what is
	// left of the budget. Zero is off.
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
	// The repo's MCP servers are the team's own tools: their calls are
	// allowed like Bash, or print mode would deny every one of them.
	mcpTools, err := claudeMCPRules(c.MCPConfig)
	if err != nil {
		return nil, err
	}
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
		if len(mcpTools) > 0 {
			args = append(args, "--allowed-tools="+strings.Join(mcpTools, ","))
		}
	} else {
		// acceptEdits covers the file tools only; the agent must also run
		// builds and tests, and the sandbox is disposable, so Bash is
		// allowed as a whole.
		args = append(args, "--permission-mode=acceptEdits",
			"--allowed-tools="+strings.Join(append([]string{"Bash"}, mcpTools...), ","))
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
	env := req.Env
	if gw := gatewayFromEnv(env); gw != nil {
		env = gw.anthropicEnv(env)
	}
	defaults := claudeOfflineEnv()
	if c.MCPConfig != "" {
		// Wait for the MCP servers before the first turn: by default print
		// mode starts without them, and a loaded machine leaves the agent's
		// first turns without its browser.
		defaults = append(defaults, "MCP_CONNECTION_NONBLOCKING=0")
	}
	cmd.Env = claudeEnvDefaults(env, defaults)
	cmd.Stdin = strings.NewReader(req.Prompt)
	return cmd, nil
}

// claudeMCPRules returns a permission rule ("mcp__<server>", which allows
// all of that server's tools) per server of an --mcp-config value: JSON
// text, or the path of a JSON file.
func claudeMCPRules(cfg string) ([]string, error) {
	if cfg == "" {
		return nil, nil
	}
	text := []byte(cfg)
	if !strings.HasPrefix(strings.TrimSpace(cfg), "{") {
		b, err := os.ReadFile(cfg)
		if err != nil {
			return nil, fmt.Errorf("claude-code harness: MCP config: %w", err)
		}
		text = b
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("claude-code harness: MCP config is not {\"mcpServers\": {...}} JSON: %w", err)
	}
	rules := make([]string, 0, len(doc.MCPServers))
	for name := range doc.MCPServers {
		// Claude Code names tools mcp__<server>__<tool> after replacing
		// what is not [a-zA-Z0-9_-] in the server name with "_".
		rules = append(rules, "mcp__"+claudeToolNameRE.ReplaceAllString(name, "_"))
	}
	slices.Sort(rules)
	return rules, nil
}

var claudeToolNameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

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
//
// Lines are read with fastjson: most of them are stream events nobody
// needs whole, and encoding/json's reflection made parsing several times
// slower than the CLI can print (see BenchmarkClaudeCodeParse).
type claudeParser struct {
	now       func() time.Time
	json      fastjson.Parser // values live until the next line
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

// claudeTokens maps an API usage object. Thinking tokens are part of
// output_tokens (and billed as output); Reasoning repeats them for the
// receipt.
func claudeTokens(u *fastjson.Value) Tokens {
	if u == nil {
		return Tokens{}
	}
	return Tokens{
		Input:      u.GetInt64("input_tokens"),
		Output:     u.GetInt64("output_tokens"),
		Reasoning:  u.GetInt64("output_tokens_details", "thinking_tokens"),
		CacheRead:  u.GetInt64("cache_read_input_tokens"),
		CacheWrite: u.GetInt64("cache_creation_input_tokens"),
	}
}

// claudeStr returns the string at keys; "" when absent or not a string.
func claudeStr(v *fastjson.Value, keys ...string) string {
	return string(v.GetStringBytes(keys...))
}

// claudeThread is the line's thread: the subagent's Agent call id, or ""
// for the main agent.
func claudeThread(v *fastjson.Value) string {
	return claudeStr(v, "parent_tool_use_id")
}

// ParseStdout implements Parser.
func (p *claudeParser) ParseStdout(line []byte) ([]Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	// Content-block stream events are half the lines and carry nothing the
	// assistant lines do not; they are checked for shape, not parsed.
	if skip, err := claudeSkippable(line); err != nil {
		return nil, fmt.Errorf("claude-code: bad stream-json line %q: %w", claudeClip(line, 120), err)
	} else if skip {
		return nil, nil
	}
	v, err := p.json.ParseBytes(line)
	if err != nil {
		return nil, fmt.Errorf("claude-code: bad stream-json line %q: %w", claudeClip(line, 120), err)
	}
	if v.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("claude-code: stream-json line is not an object: %q", claudeClip(line, 120))
	}
	typ := claudeStr(v, "type")
	if typ == "" {
		return nil, fmt.Errorf("claude-code: stream-json line without a type: %q", claudeClip(line, 120))
	}
	now := p.now()
	var evs []Event
	switch typ {
	case "system":
		evs, err = p.system(v, now)
	case "stream_event":
		evs, err = p.streamEvent(v, now)
	case "assistant":
		evs, err = p.assistant(v, now)
	case "user":
		evs, err = p.user(v, now)
	case "result":
		evs = p.result(v, now)
	default:
		return nil, nil // rate_limit_event, tool_progress, ...: not ours
	}
	if err != nil {
		return nil, fmt.Errorf("claude-code: %s line %q: %w", typ, claudeClip(line, 120), err)
	}
	return evs, nil
}

func (p *claudeParser) system(v *fastjson.Value, now time.Time) ([]Event, error) {
	switch claudeStr(v, "subtype") {
	case "init":
		id := claudeStr(v, "session_id")
		if id == "" {
			return nil, errors.New("init without session_id")
		}
		p.sessionID = id
		return []Event{{Type: EventSession, Time: now, SessionID: id, Text: claudeStr(v, "model")}}, nil
	case "permission_denied":
		// Print mode has nobody to approve a call: it is refused at once
		// and the agent goes on without it. The runner counts these.
		call := p.tools[claudeStr(v, "tool_use_id")]
		name := claudeStr(v, "tool_name")
		if name == "" {
			name = call.name
		}
		text := name + " denied"
		if call.input != "" {
			text += " " + claudeClip([]byte(call.input), 200)
		}
		if reason := claudeStr(v, "decision_reason"); reason != "" {
			text += ": " + reason
		}
		return []Event{{Type: EventStall, Time: now, SessionID: p.sessionID, Tool: name, ToolInput: call.input, Text: text}}, nil
	default:
		return nil, nil // status, compact_boundary, hook lines: not events
	}
}

func (p *claudeParser) streamEvent(v *fastjson.Value, now time.Time) ([]Event, error) {
	ev := v.Get("event")
	if ev == nil || ev.Type() != fastjson.TypeObject {
		return nil, errors.New("no event object")
	}
	th := claudeThread(v)
	switch claudeStr(ev, "type") {
	case "message_start":
		p.noteSession(claudeStr(v, "session_id"))
		id := claudeStr(ev, "message", "id")
		if id == "" {
			return nil, errors.New("message_start without a message id")
		}
		evs := p.startStep(th, id, now)
		if s := p.open[th]; s != nil && s.id == id {
			s.streamed = true
			s.tokens = claudeMaxTokens(s.tokens, claudeTokens(ev.Get("message", "usage")))
		}
		return evs, nil
	case "message_delta":
		if s := p.open[th]; s != nil {
			s.tokens = claudeMaxTokens(s.tokens, claudeTokens(ev.Get("usage")))
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

// claudeContent returns message.content, which must be a list of blocks.
func claudeContent(v *fastjson.Value) (msg *fastjson.Value, blocks []*fastjson.Value, err error) {
	msg = v.Get("message")
	if msg == nil || msg.Type() != fastjson.TypeObject {
		return nil, nil, errors.New("no message object")
	}
	content := msg.Get("content")
	if content == nil {
		return msg, nil, nil
	}
	blocks, err = content.Array()
	if err != nil {
		return msg, nil, fmt.Errorf("message %q: content is not a list of blocks", claudeStr(msg, "id"))
	}
	return msg, blocks, nil
}

func (p *claudeParser) assistant(v *fastjson.Value, now time.Time) ([]Event, error) {
	msg, blocks, err := claudeContent(v)
	if err != nil {
		return nil, err
	}
	p.noteSession(claudeStr(v, "session_id"))
	if claudeStr(msg, "model") == "<synthetic>" {
		return p.synthetic(v, blocks, now), nil
	}
	th := claudeThread(v)
	id := claudeStr(msg, "id")
	evs := p.startStep(th, id, now)
	if s := p.open[th]; s != nil && s.id == id {
		s.tokens = claudeMaxTokens(s.tokens, claudeTokens(msg.Get("usage")))
	}
	for _, b := range blocks {
		switch claudeStr(b, "type") {
		case "text":
			text := claudeStr(b, "text")
			if strings.TrimSpace(text) == "" {
				continue
			}
			evs = append(evs, Event{Type: EventText, Time: now, SessionID: p.sessionID, Text: text})
		case "tool_use":
			name := claudeStr(b, "name")
			var input string
			if in := b.Get("input"); in != nil {
				input = string(in.MarshalTo(nil))
			}
			if callID := claudeStr(b, "id"); callID != "" {
				p.tools[callID] = claudeToolCall{name: name, input: input}
			}
			evs = append(evs, Event{Type: EventToolUse, Time: now, SessionID: p.sessionID, Tool: name, ToolInput: input})
		}
	}
	if id == "" {
		// Nothing ties a message without id to its other lines.
		evs = append(evs, p.closeStep(th, now)...)
	}
	return evs, nil
}

// synthetic handles a message no model wrote: the CLI's report of an API
// failure (an error), or a filler it adds to the transcript (text). It is
// not a step: it cost nothing and took no turn.
func (p *claudeParser) synthetic(v *fastjson.Value, blocks []*fastjson.Value, now time.Time) []Event {
	apiError := v.GetBool("is_api_error_message")
	var evs []Event
	for _, b := range blocks {
		text := claudeStr(b, "text")
		if claudeStr(b, "type") != "text" || strings.TrimSpace(text) == "" {
			continue
		}
		if apiError {
			p.lastError = text
			evs = append(evs, Event{Type: EventError, Time: now, SessionID: p.sessionID, Text: text})
		} else {
			evs = append(evs, Event{Type: EventText, Time: now, SessionID: p.sessionID, Text: text})
		}
	}
	return evs
}

// user lines carry tool results back to the model. An unstreamed step is
// over once its results are back, and so is a subagent whose Agent call
// got its result.
func (p *claudeParser) user(v *fastjson.Value, now time.Time) ([]Event, error) {
	msg := v.Get("message")
	if msg == nil || msg.Type() != fastjson.TypeObject {
		return nil, errors.New("no message object")
	}
	p.noteSession(claudeStr(v, "session_id"))
	var evs []Event
	th := claudeThread(v)
	if s := p.open[th]; s != nil && !s.streamed {
		evs = p.closeStep(th, now)
	}
	// A string content is a prompt (a subagent's task): no results.
	for _, b := range msg.GetArray("content") {
		if claudeStr(b, "type") != "tool_result" {
			continue
		}
		if id := claudeStr(b, "tool_use_id"); id != "" {
			evs = append(evs, p.closeStep(id, now)...)
			delete(p.tools, id)
		}
	}
	return evs, nil
}

func (p *claudeParser) result(v *fastjson.Value, now time.Time) []Event {
	p.noteSession(claudeStr(v, "session_id"))
	var evs []Event
	for len(p.order) > 0 {
		evs = append(evs, p.closeStep(p.order[0], now)...)
	}
	subtype := claudeStr(v, "subtype")
	text := claudeStr(v, "result")
	if v.GetBool("is_error") || (subtype != "" && subtype != "success") {
		// An API failure was reported already, from its own message.
		if msg := claudeResultError(subtype, text, v.Get("errors")); msg != p.lastError {
			evs = append(evs, Event{Type: EventError, Time: now, SessionID: p.sessionID, Text: msg})
		}
	}
	// The cost is this invocation's, so that a runner adding up a run and
	// its resumed repair counts each dollar once: total_cost_usd is the
	// session's, which after --resume includes the earlier runs, while
	// model_usage_since_last_result has this run's cost per model. For a
	// new session the two agree.
	ev := Event{Type: EventResult, Time: now, SessionID: p.sessionID, Text: text,
		Tokens: claudeTokens(v.Get("usage")), CostIsTotal: true, CostUSD: v.GetFloat64("total_cost_usd")}
	if since := v.GetObject("model_usage_since_last_result"); since != nil && since.Len() > 0 {
		ev.CostUSD = 0
		// Visit goes in document order, so the float sum is reproducible.
		since.Visit(func(_ []byte, m *fastjson.Value) { ev.CostUSD += m.GetFloat64("costUSD") })
	}
	return append(evs, ev)
}

// claudeResultError says why a run failed: the subtype (error_max_turns,
// error_during_execution, ...) and the CLI's messages.
func claudeResultError(subtype, result string, errs *fastjson.Value) string {
	msg := result
	if errs != nil {
		var list []string
		for _, e := range errs.GetArray() {
			if s, err := e.StringBytes(); err == nil {
				list = append(list, string(s))
			} else {
				list = append(list, string(e.MarshalTo(nil)))
			}
		}
		if len(list) > 0 {
			msg = strings.Join(list, "; ")
		}
	}
	switch {
	case msg == "":
		return "claude-code finished with " + subtype
	case subtype != "" && subtype != "success":
		return subtype + ": " + msg
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

// claudeSkippable reports whether line is a stream event about a content
// block (content_block_start, _delta, _stop), which the parser ignores. It
// walks the line once without building anything, looking only at the
// top-level "type" and the "type" of the top-level "event" object; brackets
// must balance and strings end, so a line cut short is an error. Any other
// line is left to the full parser.
func claudeSkippable(line []byte) (bool, error) {
	if len(line) == 0 || line[0] != '{' {
		return false, errors.New("not a JSON object")
	}
	var (
		stack      []byte // open brackets
		expectKey  bool   // the next string is an object key
		key        []byte // the last key read
		keyDepth   int    // len(stack) where key was read
		eventDepth int    // len(stack) inside the top-level "event" object, 0 outside
		typ, event []byte
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			end := claudeStringEnd(line, i+1)
			if end < 0 {
				return false, errors.New("line ends inside a string (partial line)")
			}
			s := line[i+1 : end]
			i = end
			if expectKey {
				key, keyDepth, expectKey = s, len(stack), false
				continue
			}
			if string(key) == "type" && keyDepth == len(stack) {
				switch {
				case keyDepth == 1:
					typ = s
				case keyDepth == eventDepth && eventDepth == 2:
					event = s
				}
			}
		case '{', '[':
			if c == '{' && len(stack) == 1 && keyDepth == 1 && string(key) == "event" {
				eventDepth = 2
			}
			stack = append(stack, c)
			expectKey = c == '{'
		case '}', ']':
			n := len(stack)
			if n == 0 || (c == '}') != (stack[n-1] == '{') {
				return false, errors.New("mismatched brackets")
			}
			if n == eventDepth {
				eventDepth = 0
			}
			stack = stack[:n-1]
			if len(stack) == 0 {
				if len(bytes.TrimSpace(line[i+1:])) > 0 {
					return false, errors.New("text after the object")
				}
				return string(typ) == "stream_event" && bytes.HasPrefix(event, []byte("content_block_")), nil
			}
		case ',':
			expectKey = stack[len(stack)-1] == '{'
		}
	}
	return false, errors.New("line ends inside the object (partial line)")
}

// claudeStringEnd returns the index of the quote closing the string whose
// content starts at i, or -1. Escapes are skipped, not decoded.
func claudeStringEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func claudeClip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

var _ Harness = (*ClaudeCode)(nil)
