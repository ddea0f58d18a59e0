package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/media"
)

// unpackSource lays a preview's code out from the archive the bot fetched
// (GitHub's tarball of the pull request's head: one top directory). tar
// refuses absolute names and ".." by default, and runs as the agent.
func (c *checkout) unpackSource() error {
	c.ws.dir = filepath.Join(c.ws.workDir, "repo")
	if err := os.MkdirAll(c.ws.dir, 0o755); err != nil {
		return fmt.Errorf("create the preview's directory: %w", err)
	}
	if err := c.opts.Agent.give(c.ws.dir); err != nil {
		return err
	}
	c.prog.emit(dispatch.Progress{Stage: "clone", Message: "unpacking the pull request's code"})
	cmd := exec.CommandContext(c.work, "tar", "-xzf", c.order.Source, "--strip-components=1", "--no-same-owner", "--no-same-permissions", "-C", c.ws.dir)
	c.opts.Agent.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return failed("unpack the pull request's code: %v: %s", err, clipString(string(out), 500))
	}
	return nil
}

// preview serves the dev server for the order's time, then ends as
// completed; a stop before then (SIGTERM) is an interruption.
func (r *run) preview() error {
	dev := media.DevServer{Command: r.cfg.Dev.Command, Port: r.cfg.Dev.Port, Dir: r.ws.dir, Env: r.ws.env,
		Credential: r.opts.Agent.credential(), Log: filepath.Join(r.order.OutputDir, "dev-server.log"), StartTimeout: 90 * time.Second}
	ctx, cancel := context.WithCancel(r.work)
	defer cancel()
	stop, err := media.StartDevServer(ctx, dev, r.log.With().Str("stage", "dev").Logger())
	if err != nil {
		r.prog.emit(dispatch.Progress{Stage: "browser", Message: "dev server failed: " + clipString(err.Error(), 200)})
		return failed("the dev server did not start: %v", err)
	}
	defer stop()
	serve := time.Duration(r.order.PreviewSeconds) * time.Second
	r.prog.emit(dispatch.Progress{Stage: "browser", Message: fmt.Sprintf("dev server up at %s for %s", dev.URL(), serve)})
	timer := time.NewTimer(serve)
	defer timer.Stop()
	select {
	case <-timer.C:
		r.prog.emit(dispatch.Progress{Stage: "done", Message: "the preview's time is up"})
		return nil
	case <-r.work.Done():
		return r.work.Err()
	}
}
