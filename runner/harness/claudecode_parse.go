package harness

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fastjson"
)

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
