// Command sandbox-runner runs inside the sandbox.
//
//	sandbox-runner init   PID 1 of the sandbox container: inner dockerd,
//	                      services, then the runner as the sandbox user.
//	sandbox-runner run    the pipeline for one work order ($SANDBOX_WORK_ORDER
//	                      or --work-order), leaving result.json behind.
//	sandbox-runner pipe   stdin and stdout to a socket the sandbox offers the
//	                      bot (its dev server, the screencast): the bot's way
//	                      in through Nomad's allocation exec.
//	sandbox-runner opencode-session save|restore
//	                      run by the runner as the agent: copies an OpenCode
//	                      session's database out of the plan sandbox and
//	                      into the execute sandbox (package ocdb).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb"
	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-runner init|run [flags]")
		os.Exit(2)
	}
	// Signals are handled by each subcommand: init forwards SIGTERM to the
	// runner and waits; run pushes and writes an interrupted receipt.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var code int
	switch os.Args[1] {
	case "init":
		code = sandboxinit.Main(ctx, os.Args[2:])
	case "run":
		code = runner.Main(ctx, os.Args[2:])
	case "pipe":
		code = sandboxinit.Pipe(ctx, os.Args[2:])
	case occopy.Subcommand:
		code = ocdb.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	default:
		fmt.Fprintf(os.Stderr, "sandbox-runner: unknown subcommand %q (want init, run, pipe or %s)\n", os.Args[1], occopy.Subcommand)
		code = 2
	}
	os.Exit(code)
}
