package harness

import (
	"errors"
	"strings"
	"time"

	"github.com/valyala/fastjson"
)

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
