package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/media"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// EnvBrowserMCPBin overrides where the browser MCP server
// (chrome-devtools-mcp) is; otherwise it is looked up on PATH.
const EnvBrowserMCPBin = "SANDBOX_BROWSER_MCP_BIN"

// EnvRecordingsDir tells the agent (and what it runs) where to leave
// screencasts (WebM or MP4) for the PR; the prompt says so too.
const EnvRecordingsDir = "SANDBOX_RECORDINGS_DIR"

// PromptBrowser is appended to the agent's prompt when it has a browser.
const PromptBrowser = "prompts/browser"

// browser is what the agent gets when .sandbox.yml has a dev server: the
// dev server running while it works, and a Chromium it drives through an
// MCP server that its CLI starts, so Chromium runs as the agent, with the
// agent's environment, and holds nothing the agent could not read anyway.
type browser struct {
	dev media.DevServer
	// recordings is where the agent saves screencasts; the runner turns
	// them into animated WebP for the PR.
	recordings string
	// down says why the dev server is not up for this pass; empty when
	// it is.
	down string
	// devLog is the dev server's log, in the output directory.
	devLog string
}

// browserCommand is the MCP server's command line: Debian's Chromium
// (no browser download), headless, in a profile removed when it ends,
// without Chromium's own sandbox (the sandbox container is the isolation,
// and the agent's uid cannot make the namespaces it wants), with nothing
// that phones home, and file tools confined to the recordings directory.
func browserCommand(mcpBin, chromium, recordings string) []string {
	cmd := []string{mcpBin,
		"--headless", "--isolated", "--executablePath=" + chromium,
		"--viewport=1280x800", "--no-usage-statistics", "--no-performance-crux",
		"--no-page-id-routing", "--workspace=" + recordings,
		// The runner watches (screencast.go): DevTools on the sandbox's
		// loopback, a port of the agent's own browser it could drive
		// through the MCP server anyway.
		"--chromeArg=--remote-debugging-port=" + strconv.Itoa(dispatch.BrowserDebugPort),
	}
	for _, a := range []string{"--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"} {
		cmd = append(cmd, "--chromeArg="+a)
	}
	return cmd
}

// setupBrowser decides whether the agent gets a browser and, when it
// does, adds the MCP server to the configuration the harness is built
// from. It runs before the harness is made; the dev server starts later,
// around each agent pass (startDev).
func (c *checkout) setupBrowser() error {
	dev := c.cfg.Dev
	if dev.Command == "" || dev.Port == 0 || c.spec.pipeline == pipeRebase {
		return nil
	}
	if _, taken := c.cfg.MCP[dispatch.BrowserServer]; taken {
		c.log.Warn().Str("mcp", dispatch.BrowserServer).Msg(".sandbox.yml defines its own MCP server with the browser's name: the agent gets that one, and no browser from the sandbox")
		return nil
	}
	chromium := c.opts.Chromium
	if chromium == "" {
		chromium, _ = media.Lookup()
	}
	mcpBin := lookupEnvOr(c.opts.Environ, EnvBrowserMCPBin, "chrome-devtools-mcp")
	if chromium == "" || mcpBin == "" {
		c.log.Warn().Str("chromium", chromium).Str("mcp", mcpBin).Msg("dev is set but Chromium or chrome-devtools-mcp is missing: the agent gets no browser")
		c.prog.emit(dispatch.Progress{Stage: "browser", Message: "skipped: no Chromium or chrome-devtools-mcp"})
		return nil
	}
	rec := filepath.Join(c.ws.workDir, "recordings")
	if err := os.MkdirAll(rec, 0o755); err != nil {
		return fmt.Errorf("browser: recordings directory: %w", err)
	}
	if err := c.opts.Agent.give(rec); err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	mcp := make(map[string]sandboxcfg.MCPServer, len(c.cfg.MCP)+1)
	for k, v := range c.cfg.MCP {
		mcp[k] = v
	}
	mcp[dispatch.BrowserServer] = sandboxcfg.MCPServer{
		Command: browserCommand(mcpBin, chromium, rec),
		Env:     map[string]string{"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1", "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1"},
	}
	c.cfg.MCP = mcp
	c.ws.browser = &browser{
		dev:        media.DevServer{Command: dev.Command, Port: dev.Port, StartTimeout: 90 * time.Second},
		recordings: rec,
		devLog:     filepath.Join(c.order.OutputDir, "dev-server.log"),
	}
	c.ws.cast = startScreencast(c.parent, c.log)
	return nil
}

// start starts the dev server for an agent pass and returns what stops
// it. Without a browser it does nothing. A dev server that does not come
// up is not the end of the run: the agent is told (the prompt) and the
// failure is in the progress and the log.
func (b *browser) start(ctx context.Context, dir string, env []string, as *AgentUser, prog *reporter, log zerolog.Logger) (stop func()) {
	if b == nil {
		return func() {}
	}
	d := b.dev
	d.Dir, d.Env, d.Credential = dir, env, as.credential()
	d.Log = b.devLog
	stop, err := media.StartDevServer(ctx, d, log.With().Str("stage", "dev").Logger())
	if err != nil {
		log.Warn().Err(err).Msg("the dev server did not start for the agent")
		prog.emit(dispatch.Progress{Stage: "browser", Message: "dev server failed: " + clipString(err.Error(), 200)})
		b.down = err.Error()
		return func() {}
	}
	b.down = ""
	prog.emit(dispatch.Progress{Stage: "browser", Message: "dev server up at " + d.URL()})
	return stop
}

// prompt is the text appended to a prompt when the agent has a
// browser; empty otherwise.
func (b *browser) prompt(t *templates.Set, data PromptData) (string, error) {
	if b == nil {
		return "", nil
	}
	data.DevURL = b.dev.URL()
	data.Recordings = b.recordings
	data.DevDown = b.down
	return render(t, PromptBrowser, data)
}

// lookupEnvOr finds a program: the path in env's name when set, else name
// on PATH; empty when neither.
func lookupEnvOr(env []string, name, program string) string {
	if p, ok := lookupEnv(env, name); ok && p != "" {
		return p
	}
	p, err := exec.LookPath(program)
	if err != nil {
		return ""
	}
	return p
}
