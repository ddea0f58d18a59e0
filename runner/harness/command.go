package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// Command runs any program as the agent, through `sh -c`. The prompt is on
// its stdin; the mode is in the environment (SANDBOX_READ_ONLY=1 in plan mode, SANDBOX_SESSION_ID
// when continuing). A program that prints NDJSON events (CommandEvent) gets
// them parsed, tokens and cost included; any other output line counts as a
// text event, so the watchdog sees a talking program as alive.
type Command struct {
	script string
}

// NewCommand returns the harness that runs script with sh -c.
func NewCommand(script string) *Command { return &Command{script: script} }

// Name implements Harness.
func (c *Command) Name() string { return "command" }

// Command implements Harness.
func (c *Command) Command(req Request) (*exec.Cmd, error) {
	if strings.TrimSpace(c.script) == "" {
		return nil, errors.New("command harness: no command configured (set command: in .sandbox.yml)")
	}
	if req.Dir == "" {
		return nil, errors.New("command harness: no working directory")
	}
	cmd := exec.Command("sh", "-c", c.script)
	cmd.Dir = req.Dir
	env := dotenv.Without(req.Env, "PWD", "SANDBOX_READ_ONLY", "SANDBOX_SESSION_ID", "SANDBOX_MODEL")
	env = append(env, "PWD="+req.Dir)
	if req.ReadOnly {
		env = append(env, "SANDBOX_READ_ONLY=1")
	}
	if req.SessionID != "" {
		env = append(env, "SANDBOX_SESSION_ID="+req.SessionID)
	}
	if req.Model != "" {
		env = append(env, "SANDBOX_MODEL="+req.Model)
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(req.Prompt)
	return cmd, nil
}

// CommandEvent is the NDJSON a command may print, one object per line.
// Type is one of the EventType values.
type CommandEvent struct {
	Type      EventType `json:"type"`
	SessionID string    `json:"session_id,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Input     any       `json:"input,omitempty"`
	Text      string    `json:"text,omitempty"`
	Tokens    *struct {
		Input      int64 `json:"input"`
		Output     int64 `json:"output"`
		Reasoning  int64 `json:"reasoning"`
		CacheRead  int64 `json:"cache_read"`
		CacheWrite int64 `json:"cache_write"`
	} `json:"tokens,omitempty"`
	CostUSD     float64 `json:"cost_usd,omitempty"`
	CostIsTotal bool    `json:"cost_is_total,omitempty"`
}

// NewParser implements Harness.
func (c *Command) NewParser() Parser { return commandParser{} }

type commandParser struct{}

func (commandParser) ParseStdout(line []byte) ([]Event, error) {
	trimmed := bytes.TrimSpace(line)
	now := time.Now()
	if len(trimmed) == 0 || trimmed[0] != '{' {
		// Plain text, kept as written: indentation and blank lines are
		// part of a plan's code blocks.
		return []Event{{Type: EventText, Time: now, Text: string(bytes.TrimRight(line, "\r\n")), Line: true}}, nil
	}
	var ce CommandEvent
	if err := json.Unmarshal(trimmed, &ce); err != nil {
		return nil, fmt.Errorf("command: bad JSON event line %q: %w", clip(trimmed, 120), err)
	}
	switch ce.Type {
	case EventSession, EventStepStart, EventToolUse, EventText, EventStepFinish, EventError, EventResult, EventStall:
	case "":
		// A JSON line that is not an event: the program's own output.
		return []Event{{Type: EventText, Time: now, Text: string(bytes.TrimRight(line, "\r\n")), Line: true}}, nil
	default:
		return nil, fmt.Errorf("command: unknown event type %q in %q", ce.Type, clip(trimmed, 120))
	}
	ev := Event{Type: ce.Type, Time: now, SessionID: ce.SessionID, Tool: ce.Tool, Text: ce.Text, CostUSD: ce.CostUSD, CostIsTotal: ce.CostIsTotal}
	if ce.Input != nil {
		b, _ := json.Marshal(ce.Input)
		ev.ToolInput = string(b)
	}
	if t := ce.Tokens; t != nil {
		ev.Tokens = Tokens{Input: t.Input, Output: t.Output, Reasoning: t.Reasoning, CacheRead: t.CacheRead, CacheWrite: t.CacheWrite}
	}
	return []Event{ev}, nil
}

func (commandParser) ParseStderr([]byte) []Event { return nil }
