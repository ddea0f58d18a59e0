package dispatch

import "strings"

// BrowserServer is the name of the MCP server that gives the agent a
// browser when .sandbox.yml has a dev server.
const BrowserServer = "browser"

// IsBrowserTool reports whether name is one of the browser's tools as an
// agent CLI names MCP tools: OpenCode as <server>_<tool>, Claude Code as
// mcp__<server>__<tool>.
func IsBrowserTool(name string) bool {
	return strings.HasPrefix(name, BrowserServer+"_") || strings.HasPrefix(name, "mcp__"+BrowserServer+"__")
}

// BrowserCalls is how many of the agent's tool calls went to its browser.
func (r *Result) BrowserCalls() int {
	n := 0
	for name, c := range r.Tools {
		if IsBrowserTool(name) {
			n += c
		}
	}
	return n
}
