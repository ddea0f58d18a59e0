// Package sandboxinit is PID 1 of the sandbox container (`sandbox-runner
// init`). In a coding sandbox it makes the container able to host a Docker
// daemon (cgroups writable, stale state of an earlier start removed, storage
// driver picked), fences off the egress defaults, starts the inner
// containerd and dockerd with their logs in /var/log, creates the inner
// network, starts the services of .sandbox.yml and probes their health in
// parallel, writes the services file, and then runs `sandbox-runner run`
// as the runner user (the agent's tools as the sandbox user). Independent
// parts of the start run at once (start.go): the daemon and services, the
// agent's Docker socket, and the model gateway with the identities; the
// "runner started" line gives each step's timing. It waits on the runner
// (never exec), forwards SIGTERM/SIGINT so the runner can push and write
// its interrupted receipt, and stops the inner daemon cleanly before
// exiting with the runner's code.
//
// Task mode has no inner daemon and the agent no privileges: the init
// starts as root with the capabilities of its fence alone, installs the
// egress defaults and the host wall, and then becomes the sandbox user
// with no capability at all and only supervises the runner
// (taskfence.go).
package sandboxinit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Environment the init reads (besides dispatch.EnvWorkOrder).
const (
	envStorageDriver  = "SANDBOX_STORAGE_DRIVER"  // force overlay2, fuse-overlayfs or vfs
	envCacheDir       = "SANDBOX_CACHE_DIR"       // default /cache
	envDockerdTimeout = "SANDBOX_DOCKERD_TIMEOUT" // seconds, default 60
	envUser           = "SANDBOX_USER"            // default sandbox
	envLogLevel       = "SANDBOX_LOG_LEVEL"       // debug, info (default), warn
	envDinD           = dispatch.EnvDinD          // "0": no inner daemon whatever the mode
)

// defaultRuntimeDir holds what the init hands the runner.
const defaultRuntimeDir = "/run/sandbox"

// Exit codes of the init itself; otherwise it exits with the runner's code.
const (
	exitSetupFailed = 3
	exitUsage       = 2
	exitInterrupted = 128 + int(syscall.SIGTERM)
)

type options struct {
	check          bool
	checkRuntime   string
	workOrder      string
	command        []string
	user           string
	cacheDir       string
	storageDriver  string
	dockerdTimeout time.Duration
	runtimeDir     string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	o := options{
		workOrder:      getenv(dispatch.EnvWorkOrder),
		user:           getenv(envUser),
		cacheDir:       getenv(envCacheDir),
		storageDriver:  getenv(envStorageDriver),
		dockerdTimeout: 60 * time.Second,
		runtimeDir:     defaultRuntimeDir,
	}
	if o.user == "" {
		o.user = "sandbox"
	}
	if o.cacheDir == "" {
		o.cacheDir = "/cache"
	}
	if v := getenv(envDockerdTimeout); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("%s=%q: want a number of seconds", envDockerdTimeout, v)
		}
		o.dockerdTimeout = time.Duration(n) * time.Second
	}
	switch o.storageDriver {
	case "", driverOverlay2, driverFuse, driverVFS:
	default:
		return o, fmt.Errorf("%s=%q: want overlay2, fuse-overlayfs or vfs", envStorageDriver, o.storageDriver)
	}
	fs := flag.NewFlagSet("sandbox-runner init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-runner init [--check] [--work-order FILE] [--user NAME] [-- COMMAND...]")
		fmt.Fprintln(stderr, "  PID 1 of the sandbox. Without a command it runs `sandbox-runner run` as the sandbox user.")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.check, "check", false, "diagnose this host: cgroups, storage driver, inner dockerd start; print a report and exit")
	fs.StringVar(&o.checkRuntime, "check-runtime", "", "check the container's runtime: print the kernel and the iptables that works, leave a socket in `DIR`, exit")
	fs.StringVar(&o.workOrder, "work-order", o.workOrder, "work order JSON (default $"+dispatch.EnvWorkOrder+")")
	fs.StringVar(&o.user, "user", o.user, "user the runner runs as (default $"+envUser+" or sandbox)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	if !o.check && o.checkRuntime == "" && len(o.command) == 0 && o.workOrder == "" {
		return o, fmt.Errorf("no work order: set $%s or --work-order (or give a command after --)", dispatch.EnvWorkOrder)
	}
	return o, nil
}

// Main runs `sandbox-runner init` and returns the exit code.
func Main(ctx context.Context, args []string) int {
	if os.Getpid() == 1 && os.Getenv(envChild) == "" {
		return runPID1(args)
	}
	opts, err := parseOptions(args, os.Getenv, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "sandbox-runner init: %v\n", err)
		}
		return exitUsage
	}
	level, err := zerolog.ParseLevel(os.Getenv(envLogLevel))
	if err != nil || level == zerolog.NoLevel {
		level = zerolog.InfoLevel
	}
	// Start-up steps take tens of milliseconds; second-resolution times
	// would hide where a slow start spends them. This process only logs
	// through this logger, so setting zerolog's format here is harmless.
	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Str("component", "sandbox-init").Logger()
	if opts.check {
		return check(ctx, log, opts, os.Stdout)
	}
	if opts.checkRuntime != "" {
		return checkRuntime(ctx, opts.checkRuntime, os.Stdout)
	}
	started := time.Now()
	s := &sandbox{opts: opts, log: log, started: started, steps: newSteps(started)}
	return s.run(ctx)
}
