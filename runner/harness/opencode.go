package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// OpenCode runs `opencode run --format json` (sst/opencode, the npm package
// opencode-ai). Its configuration is generated per invocation and passed in
// OPENCODE_CONFIG_CONTENT, which OpenCode merges over the file named by
// OPENCODE_CONFIG (the operator's providers and keys) and the repository's
// own opencode.json, so the permissions the runner needs always win.
type OpenCode struct {
	bin string
	// Helper is the sandbox-runner binary, whose opencode-session
	// subcommand copies sessions in and out of OpenCode's database as the
	// agent (SessionPorter). Empty: sessions are not carried.
	Helper string
	// MCP servers from .sandbox.yml, exposed to the agent.
	MCP map[string]sandboxcfg.MCPServer
}

// NewOpenCode returns the harness for the opencode binary at bin.
func NewOpenCode(bin string) *OpenCode { return &OpenCode{bin: bin} }

// Name implements Harness.
func (o *OpenCode) Name() string { return "opencode" }

// TakesImages implements ImageTaker.
func (o *OpenCode) TakesImages() bool { return true }

// openCodeEnv keeps OpenCode offline apart from the model provider: no
// self-update, no model list download, no LSP downloads, no share links,
// no default plugins (they fetch from npm at start-up).
func openCodeEnv() []string {
	return []string{
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_SHARE=1",
	}
}

// Command implements Harness. The prompt goes on stdin (opencode run reads
// it when no message argument is given), since argv has a per-argument
// size limit that a long issue plus plan can pass.
func (o *OpenCode) Command(req Request) (*exec.Cmd, error) {
	if o.bin == "" {
		return nil, errors.New("opencode harness: no opencode binary configured (install opencode-ai or set SANDBOX_OPENCODE_BIN)")
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, errors.New("opencode harness: empty prompt")
	}
	if req.Dir == "" {
		return nil, errors.New("opencode harness: no working directory")
	}
	content, err := o.configContent(req.ReadOnly, gatewayFromEnv(req.Env))
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--format", "json", "--dir", req.Dir}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.SessionID != "" {
		args = append(args, "--session", req.SessionID)
	}
	// Images are files OpenCode attaches to the message (`--file`): it
	// reads each, as the agent, and sends it to an image-capable model as
	// an image part.
	for _, img := range req.Images {
		if img.Path == "" {
			return nil, errors.New("opencode harness: an image without a file")
		}
		args = append(args, "--file="+img.Path)
	}
	cmd := exec.Command(o.bin, args...)
	cmd.Dir = req.Dir
	// OpenCode resolves relative paths against $PWD, not the process's
	// working directory: an inherited PWD would send writes elsewhere.
	env := dotenv.Without(req.Env, "PWD", "OPENCODE_CONFIG_CONTENT")
	env = append(env, "PWD="+req.Dir, "OPENCODE_CONFIG_CONTENT="+content)
	cmd.Env = envDefaults(env, openCodeEnv())
	cmd.Stdin = strings.NewReader(req.Prompt)
	return cmd, nil
}

// ConfigContent is the opencode.json overlay for one invocation.
//
// Execute modes allow edits and shell commands without asking: the sandbox
// is the isolation, and in `opencode run` nobody could answer a question.
// Operations OpenCode still asks about (writes outside the project, doom
// loops) are auto-rejected, which the parser reports as a stall. Plan mode
// removes the edit tools; shell stays, because exploring a repository needs
// it, and the runner verifies afterwards that the tree is unchanged.
func (o *OpenCode) ConfigContent(readOnly bool) (string, error) {
	return o.configContent(readOnly, nil)
}

// configContent is ConfigContent with the providers the model gateway
// serves re-addressed to it.
func (o *OpenCode) configContent(readOnly bool, gw *modelGateway) (string, error) {
	perm := map[string]any{"edit": "allow", "bash": "allow", "webfetch": "allow"}
	if readOnly {
		perm["edit"] = "deny"
	}
	doc := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		// The runner commits the agent's work itself; OpenCode's own
		// snapshots (a shadow git repository it updates every step) would
		// only cost time and disk on a big checkout.
		"snapshot":   false,
		"permission": perm,
	}
	if gw != nil {
		doc["provider"] = gw.openCodeProviders()
	}
	if len(o.MCP) > 0 {
		mcp := map[string]any{}
		for name, s := range o.MCP {
			if s.URL != "" {
				mcp[name] = map[string]any{"type": "remote", "url": s.URL, "enabled": true}
				continue
			}
			entry := map[string]any{"type": "local", "command": s.Command, "enabled": true}
			if len(s.Env) > 0 {
				env := map[string]string{}
				for k, v := range s.Env {
					env[k] = openCodeEnvRefs(v)
				}
				entry["environment"] = env
			}
			mcp[name] = entry
		}
		doc["mcp"] = mcp
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("opencode harness: encode config: %w", err)
	}
	return string(b), nil
}

var dollarRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// openCodeEnvRefs turns .sandbox.yml's ${VAR} into OpenCode's {env:VAR}, so
// OpenCode reads secrets from its environment and their values never sit
// in the generated configuration.
func openCodeEnvRefs(v string) string { return dollarRef.ReplaceAllString(v, "{env:$1}") }

// NewParser implements Harness.
func (o *OpenCode) NewParser() Parser { return &openCodeParser{} }

type openCodeParser struct {
	sessionID string
}

// openCodeLine is the union of the `--format json` line types.
type openCodeLine struct {
	Type      string        `json:"type"`
	Timestamp int64         `json:"timestamp"`
	SessionID string        `json:"sessionID"`
	Part      *openCodePart `json:"part"`
	Error     *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

type openCodePart struct {
	Tool   string `json:"tool"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
	State  *struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Error  string          `json:"error"`
	} `json:"state"`
	Tokens *struct {
		Input     int64 `json:"input"`
		Output    int64 `json:"output"`
		Reasoning int64 `json:"reasoning"`
		Cache     struct {
			Read  int64 `json:"read"`
			Write int64 `json:"write"`
		} `json:"cache"`
	} `json:"tokens"`
	Cost float64 `json:"cost"`
}

// ParseStdout implements Parser.
func (p *openCodeParser) ParseStdout(line []byte) ([]Event, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	var l openCodeLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("opencode: bad JSON event line %q: %w", clip(line, 120), err)
	}
	if l.Type == "" {
		return nil, fmt.Errorf("opencode: event line without a type: %q", clip(line, 120))
	}
	t := time.Now()
	if l.Timestamp > 0 {
		t = time.UnixMilli(l.Timestamp)
	}
	var evs []Event
	// The first session seen is the one to continue; a subagent's events
	// (task tool) must not replace it.
	if l.SessionID != "" && p.sessionID == "" {
		p.sessionID = l.SessionID
		evs = append(evs, Event{Type: EventSession, Time: t, SessionID: l.SessionID})
	}
	ev := Event{Time: t, SessionID: p.sessionID}
	switch l.Type {
	case "step_start":
		ev.Type = EventStepStart
	case "text":
		if l.Part == nil {
			return evs, fmt.Errorf("opencode: text event without part: %q", clip(line, 120))
		}
		ev.Type, ev.Text = EventText, l.Part.Text
	case "tool_use":
		if l.Part == nil || l.Part.Tool == "" {
			return evs, fmt.Errorf("opencode: tool_use event without a tool: %q", clip(line, 120))
		}
		ev.Type, ev.Tool = EventToolUse, l.Part.Tool
		if s := l.Part.State; s != nil {
			// OpenCode prints compact JSON, so the input is compact as is.
			ev.ToolInput = string(s.Input)
			if s.Status == "error" {
				ev.Text = s.Error
			}
		}
	case "step_finish":
		if l.Part == nil {
			return evs, fmt.Errorf("opencode: step_finish event without part: %q", clip(line, 120))
		}
		ev.Type, ev.CostUSD = EventStepFinish, l.Part.Cost
		if tk := l.Part.Tokens; tk != nil {
			ev.Tokens = Tokens{Input: tk.Input, Output: tk.Output, Reasoning: tk.Reasoning, CacheRead: tk.Cache.Read, CacheWrite: tk.Cache.Write}
		}
	case "error":
		ev.Type = EventError
		switch {
		case l.Error == nil:
			ev.Text = "opencode reported an error without details"
		case l.Error.Data.Message != "":
			ev.Text = l.Error.Name + ": " + l.Error.Data.Message
		default:
			ev.Text = l.Error.Name
		}
	default:
		// Newer OpenCode versions add event types (reasoning, ...); they
		// are not errors, just nothing the runner acts on.
		return evs, nil
	}
	return append(evs, ev), nil
}

var (
	ansiEscape   = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	autoRejected = regexp.MustCompile(`permission requested: (.*); auto-rejecting`)
)

// ParseStderr implements Parser: `opencode run` has nobody to ask, so an
// operation that needs approval is rejected and the run ends there. The
// runner tells the agent what was rejected and gives it another pass.
func (p *openCodeParser) ParseStderr(line []byte) []Event {
	s := ansiEscape.ReplaceAllString(string(line), "")
	m := autoRejected.FindStringSubmatch(s)
	if m == nil {
		return nil
	}
	return []Event{{Type: EventStall, Time: time.Now(), SessionID: p.sessionID, Text: "permission requested: " + m[1] + "; auto-rejected"}}
}

func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// envDefaults appends each KEY=VALUE of defs whose key env does not set, so
// an operator can still override a default.
func envDefaults(env, defs []string) []string {
	set := map[string]bool{}
	for _, e := range env {
		if i := strings.IndexByte(e, '='); i > 0 {
			set[e[:i]] = true
		}
	}
	out := append([]string(nil), env...)
	for _, d := range defs {
		if !set[d[:strings.IndexByte(d, '=')]] {
			out = append(out, d)
		}
	}
	return out
}
