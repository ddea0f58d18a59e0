package harness

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// Bins are the agent CLIs' paths. An empty path means "not installed".
type Bins struct {
	OpenCode   string
	ClaudeCode string
	// Runner is the sandbox-runner binary, run as the agent to carry
	// OpenCode's sessions (OpenCode.Helper).
	Runner string
}

// Environment variables that override where the agent CLIs are.
const (
	EnvOpenCodeBin   = "SANDBOX_OPENCODE_BIN"
	EnvClaudeCodeBin = "SANDBOX_CLAUDE_BIN"
)

// LookupBins finds the CLIs: getenv's overrides first, then PATH.
func LookupBins(getenv func(string) string) Bins {
	find := func(env, name string) string {
		if p := getenv(env); p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		return ""
	}
	return Bins{OpenCode: find(EnvOpenCodeBin, "opencode"), ClaudeCode: find(EnvClaudeCodeBin, "claude")}
}

// ByName builds the harness cfg.Harness names, configured from cfg.
func ByName(cfg sandboxcfg.Resolved, bins Bins) (Harness, error) {
	switch cfg.Harness {
	case "opencode", "":
		if bins.OpenCode == "" {
			return nil, fmt.Errorf("harness opencode: the opencode CLI is not installed (npm i -g opencode-ai, or set %s)", EnvOpenCodeBin)
		}
		h := NewOpenCode(bins.OpenCode)
		h.MCP = cfg.MCP
		h.Helper = bins.Runner
		return h, nil
	case "claude-code":
		if bins.ClaudeCode == "" {
			return nil, fmt.Errorf("harness claude-code: the claude CLI is not installed (npm i -g @anthropic-ai/claude-code, or set %s)", EnvClaudeCodeBin)
		}
		h := NewClaudeCode(bins.ClaudeCode)
		if len(cfg.MCP) > 0 {
			mcp, err := claudeMCPConfig(cfg.MCP)
			if err != nil {
				return nil, err
			}
			h.MCPConfig = mcp
		}
		return h, nil
	case "command":
		if cfg.Command == "" {
			return nil, fmt.Errorf("harness command: .sandbox.yml sets no command")
		}
		return NewCommand(cfg.Command), nil
	default:
		return nil, fmt.Errorf("harness %q is unknown (want opencode, claude-code or command)", cfg.Harness)
	}
}

// claudeMCPConfig renders config.mcp as Claude Code's --mcp-config JSON.
// Claude Code expands ${VAR} in it itself, so secrets stay references.
func claudeMCPConfig(servers map[string]sandboxcfg.MCPServer) (string, error) {
	out := map[string]any{}
	for name, s := range servers {
		if s.URL != "" {
			out[name] = map[string]any{"type": "http", "url": s.URL}
			continue
		}
		if len(s.Command) == 0 {
			return "", fmt.Errorf("mcp.%s: neither command nor url is set", name)
		}
		entry := map[string]any{"command": s.Command[0], "args": s.Command[1:]}
		if len(s.Env) > 0 {
			entry["env"] = s.Env
		}
		out[name] = entry
	}
	b, err := json.Marshal(map[string]any{"mcpServers": out})
	if err != nil {
		return "", fmt.Errorf("encode mcp config: %w", err)
	}
	return string(b), nil
}
