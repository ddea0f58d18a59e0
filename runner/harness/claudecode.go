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

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// ClaudeCode runs Anthropic's Claude Code CLI in print mode and reads its
// stream-json output (`claude -p --output-format stream-json --verbose`).
type ClaudeCode struct {
	bin string

	// MaxTurns bounds the agentic turns of one invocation (--max-turns);
	// zero leaves the CLI's default.
	MaxTurns int
	// MaxBudgetUSD makes the CLI stop by itself once its cost passes the
	// amount (--max-budget-usd; the result is then error_max_budget_usd);
	// the lower of it and Request.BudgetUSD applies. Claude Code reports
	// cost only in its final result event, so the runner's budget guard
	// cannot stop it mid-run. Zero is off.
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
	args = append(args, claudePermissions(req.ReadOnly, mcpTools)...)
	args = append(args, "--permission-prompts=none")
	if c.MaxTurns > 0 {
		args = append(args, "--max-turns="+strconv.Itoa(c.MaxTurns))
	}
	if budget := sandboxcfg.Lowest(c.MaxBudgetUSD, req.BudgetUSD); budget > 0 {
		args = append(args, "--max-budget-usd="+strconv.FormatFloat(budget, 'f', -1, 64))
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
	if len(req.Images) > 0 {
		// Images need the stream-json input: one user message whose
		// content is the prompt's text block and an image block each.
		line, err := claudeUserMessage(req.Prompt, req.Images)
		if err != nil {
			return nil, err
		}
		cmd.Args = append(cmd.Args, "--input-format=stream-json")
		cmd.Stdin = bytes.NewReader(line)
	}
	return cmd, nil
}

// claudePermissions are the flags of what the agent may do without asking.
// In print mode nobody answers a permission prompt: whatever would ask is
// denied at once (--permission-prompts none), and the denial shows up as
// a stall event instead of a hang.
func claudePermissions(readOnly bool, mcpTools []string) []string {
	if readOnly {
		// Not --permission-mode plan: its system prompt steers the model to
		// write a plan file and call ExitPlanMode, interactive steps that
		// fail in print mode. Default mode with the edit tools removed lets
		// the model read and run read-only commands; anything that would
		// change the tree needs approval, which is denied.
		args := []string{"--permission-mode=default", "--disallowed-tools=Write,Edit,MultiEdit,NotebookEdit"}
		if len(mcpTools) > 0 {
			args = append(args, "--allowed-tools="+strings.Join(mcpTools, ","))
		}
		return args
	}
	// acceptEdits covers the file tools only; the agent must also run
	// builds and tests, and the sandbox is disposable, so Bash is allowed
	// as a whole.
	return []string{"--permission-mode=acceptEdits", "--allowed-tools=" + strings.Join(append([]string{"Bash"}, mcpTools...), ",")}
}

// TakesImages implements ImageTaker.
func (c *ClaudeCode) TakesImages() bool { return true }

// claudeUserMessage is the stream-json input line of a user message with
// the prompt and images (Anthropic's base64 image blocks).
func claudeUserMessage(prompt string, images []Image) ([]byte, error) {
	type source struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"` // base64 in JSON
	}
	type block struct {
		Type   string  `json:"type"`
		Text   string  `json:"text,omitempty"`
		Source *source `json:"source,omitempty"`
	}
	content := []block{{Type: "text", Text: prompt}}
	for _, img := range images {
		if len(img.Data) == 0 {
			return nil, errors.New("claude-code harness: an image without data")
		}
		content = append(content, block{Type: "image", Source: &source{Type: "base64", MediaType: img.MediaType, Data: img.Data}})
	}
	msg := map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": content}}
	line, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("claude-code harness: encode the message: %w", err)
	}
	return append(line, '\n'), nil
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

var _ Harness = (*ClaudeCode)(nil)
