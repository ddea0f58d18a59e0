// Command sandbox-agent is the local CLI: it runs the same runner the bot
// dispatches, against a local or remote git repository, from a terminal.
//
//	sandbox-agent create   --task TEXT [--project FILE|DIR] [--repo PATH|URL]
//	sandbox-agent continue --task-id T-XXXXXXXX --target-branch BRANCH --task TEXT
//	sandbox-agent revise   --target-branch BRANCH --feedback TEXT
//	sandbox-agent rebase   --target-branch BRANCH
//	sandbox-agent task     --task TEXT
//	sandbox-agent validate [--project FILE|DIR] [--repo PATH]
//	sandbox-agent quickstart [DIR]
//
// Run `sandbox-agent <command> -h` for every flag.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The first ^C cancels the run (the runner pushes and writes an
	// interrupted receipt); the runner sits in its own process group, so
	// the terminal's signal does not reach it directly.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c := newCLI(os.Stdin, os.Stdout, os.Stderr, os.Environ())
	c.self = os.Args[0]
	os.Exit(c.run(ctx, os.Args[1:]))
}
