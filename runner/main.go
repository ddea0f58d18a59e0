package runner

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// Exit codes of `sandbox-runner run`.
const (
	ExitCompleted = 0
	ExitNotDone   = 1 // the receipt says why
	ExitUsage     = 2 // no work order: no receipt could be written
)

// Main runs `sandbox-runner run [--work-order PATH] [--env-file PATH]` and
// returns the exit code. ctx ends on SIGTERM/SIGINT.
func Main(ctx context.Context, args []string) int {
	// This binary is also the helper that copies OpenCode's sessions as
	// the agent (its opencode-session subcommand).
	self, _ := os.Executable()
	return mainWith(ctx, args, os.Stdout, os.Stderr, os.Getenv, self)
}

func mainWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, self string) int {
	fs := flag.NewFlagSet("sandbox-runner run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	orderPath := fs.String("work-order", getenv(dispatch.EnvWorkOrder), "path of the work order JSON (default $"+dispatch.EnvWorkOrder+")")
	envFile := fs.String("env-file", getenv(dispatch.EnvEnvFile), "a .env file applied last (local runs; default $"+dispatch.EnvEnvFile+")")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *orderPath == "" {
		fmt.Fprintf(stderr, "sandbox-runner run: no work order: pass --work-order or set %s\n", dispatch.EnvWorkOrder)
		return ExitUsage
	}
	order, err := ReadWorkOrder(*orderPath)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-runner run: %v\n", err)
		if order == nil || order.OutputDir == "" {
			return ExitUsage
		}
		// The order is readable enough to know where the receipt goes: a
		// failed receipt tells the bot more than a silent exit.
		res := &dispatch.Result{TaskID: order.TaskID, Mode: order.Mode, Status: dispatch.StatusFailed, Error: &dispatch.RunError{Message: err.Error()}}
		if werr := dispatch.WriteResult(order.OutputDir, res); werr != nil {
			fmt.Fprintf(stderr, "sandbox-runner run: %v\n", werr)
		}
		return ExitNotDone
	}
	set, err := templates.Load(getenv(dispatch.EnvTemplatesDir))
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-runner run: %v\n", err)
		return ExitUsage
	}
	opts := Options{
		Templates:    set,
		Bins:         harness.LookupBins(getenv),
		Progress:     stdout,
		Log:          stderr,
		WorkDir:      getenv(dispatch.EnvWorkspace),
		StateDir:     getenv(dispatch.EnvStateDir),
		ServicesFile: getenv(dispatch.EnvServicesFile),
		EnvFile:      *envFile,
	}
	opts.Bins.Runner = self
	if name := getenv(dispatch.EnvAgentUser); name != "" {
		// The init started us as the runner user with the capabilities to
		// run the agent as another: none of them may reach the agent.
		if err := dropInheritableCaps(); err != nil {
			fmt.Fprintf(stderr, "sandbox-runner run: %v\n", err)
			return ExitUsage
		}
		a, err := LookupAgentUser(name)
		if err != nil {
			fmt.Fprintf(stderr, "sandbox-runner run: %s: %v\n", dispatch.EnvAgentUser, err)
			return ExitUsage
		}
		opts.Agent = a
	}
	opts.SetupCacheDir = getenv(dispatch.EnvSetupCacheDir)
	opts.StartTimings = getenv(dispatch.EnvStartTimings)
	opts.OSVDir = getenv(dispatch.EnvOSVDir)
	if opts.SetupCacheMaxBytes, err = parseSize(getenv(dispatch.EnvSetupCacheMaxSize)); err != nil {
		fmt.Fprintf(stderr, "sandbox-runner run: %s: %v\n", dispatch.EnvSetupCacheMaxSize, err)
		return ExitUsage
	}
	if d, err := time.ParseDuration(getenv(dispatch.EnvPushInterval)); err == nil {
		opts.PushInterval = d
	}
	if d, err := time.ParseDuration(getenv(dispatch.EnvStartupGrace)); err == nil {
		opts.StartupGrace = d
	}
	res := Run(ctx, *order, opts)
	if res.Status == dispatch.StatusCompleted {
		return ExitCompleted
	}
	return ExitNotDone
}

// ReadWorkOrder reads and validates a work order file. On a validation
// error it still returns the decoded order, so the caller can write a
// failed receipt into its output dir.
func ReadWorkOrder(path string) (*dispatch.WorkOrder, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read work order: %w", err)
	}
	var o dispatch.WorkOrder
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("work order %s is not valid JSON: %w", path, err)
	}
	if err := o.Validate(); err != nil {
		return &o, fmt.Errorf("%s: %w", path, err)
	}
	return &o, nil
}
