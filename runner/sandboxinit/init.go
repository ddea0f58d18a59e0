// Package sandboxinit is PID 1 of the sandbox container (`sandbox-runner
// init`). In a coding sandbox it makes the container able to host a Docker
// daemon (cgroups writable, stale state of an earlier start removed, storage
// driver picked), starts the inner containerd and dockerd with their logs in
// /var/log, creates the inner network, starts the services of .sandbox.yml
// and probes their health in parallel, writes the services file, and then
// runs `sandbox-runner run` as the unprivileged sandbox user. It waits on
// the runner (never exec), forwards SIGTERM/SIGINT so the runner can push
// and write its interrupted receipt, and stops the inner daemon cleanly
// before exiting with the runner's code.
//
// Task mode, or a container started as a non-root user, has no inner
// daemon and no privileges: the init only supervises the runner.
package sandboxinit

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit/dockerfilter"
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
	fs.StringVar(&o.workOrder, "work-order", o.workOrder, "work order JSON (default $"+dispatch.EnvWorkOrder+")")
	fs.StringVar(&o.user, "user", o.user, "user the runner runs as (default $"+envUser+" or sandbox)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	if !o.check && len(o.command) == 0 && o.workOrder == "" {
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
	s := &sandbox{opts: opts, log: log, started: time.Now(), docker: newDockerCLI(log)}
	return s.run(ctx)
}

// sandbox is one start of the sandbox container.
type sandbox struct {
	opts    options
	log     zerolog.Logger
	started time.Time
	docker  dockerCLI

	order    *dispatch.WorkOrder
	daemon   *daemon
	services dispatch.Services
	egress   *egress   // network.allow's proxy, when set
	deny     denyState // the egress defaults (egress_deny.go)
	saves    sync.WaitGroup

	dockerFilter *dockerfilter.Filter // the agent's Docker socket
}

func (s *sandbox) run(parent context.Context) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	// Until the runner runs, a signal aborts the start; afterwards it is
	// the runner's to handle.
	var (
		mu          sync.Mutex
		runner      *child
		interrupted bool
	)
	go func() {
		for sig := range sigs {
			mu.Lock()
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				interrupted = true
			}
			if runner != nil {
				s.log.Info().Str("signal", sig.String()).Msg("forwarding to the runner")
				_ = runner.cmd.Process.Signal(sig)
			} else {
				s.log.Info().Str("signal", sig.String()).Msg("signal during start: stopping")
				cancel()
			}
			mu.Unlock()
		}
	}()

	if err := s.loadOrder(); err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	saveCtx, stopSaves := context.WithCancel(context.Background())
	defer stopSaves()

	extraEnv, err := s.prepare(ctx, saveCtx)
	if err != nil {
		if ctx.Err() != nil {
			return s.fail(dispatch.StatusInterrupted, fmt.Errorf("stopped while the sandbox was starting: %w", err))
		}
		return s.fail(dispatch.StatusFailed, err)
	}
	if err := s.enforceEgressDefaults(ctx, execIPTables); err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}

	var acct *account
	if os.Geteuid() == 0 {
		a, err := lookupAccount(s.opts.user)
		if err != nil {
			return s.fail(dispatch.StatusFailed, err)
		}
		acct = &a
	}
	// The gateway reads its providers file before the runner's identity
	// takes the secrets directory out of everyone's reach but the runner's.
	if err := s.startGateway(ctx, acct, extraEnv); err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	var separate *runnerIdentity
	if acct != nil {
		a := *acct
		if err := s.handOver(a); err != nil {
			return s.fail(dispatch.StatusFailed, err)
		}
		if len(s.opts.command) == 0 {
			if separate, err = s.separateRunner(a); err != nil {
				return s.fail(dispatch.StatusFailed, err)
			}
		}
	}
	if s.order != nil && len(s.order.Config.Network.Allow) > 0 {
		env, err := s.startEgress(ctx, acct, execIPTables)
		if err != nil {
			return s.fail(dispatch.StatusFailed, err)
		}
		for k, v := range env {
			extraEnv[k] = v
		}
	}

	argv := s.opts.command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return s.fail(dispatch.StatusFailed, fmt.Errorf("find own executable: %w", err))
		}
		argv = []string{exe, "run"}
	}
	runAs, caps := acct, []uintptr(nil)
	if separate != nil {
		runAs, caps = &separate.acct, runnerCaps
		for k, v := range separate.env {
			extraEnv[k] = v
		}
	}
	dir := "/"
	if runAs != nil && isDir(runAs.Home) {
		dir = runAs.Home
	}

	mu.Lock()
	if ctx.Err() != nil {
		mu.Unlock()
		return s.fail(dispatch.StatusInterrupted, errors.New("stopped before the runner started"))
	}
	runner, err = startChild(s.log, argv, childEnv(os.Environ(), runAs, extraEnv), dir, runAs, caps)
	mu.Unlock()
	if err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	s.log.Info().Strs("argv", argv).Str("user", userName(runAs)).Str("agent_user", userName(acct)).
		Float64("ready_seconds", time.Since(s.started).Seconds()).Msg("runner started")

	<-runner.done
	code := runner.code
	mu.Lock()
	wasInterrupted := interrupted
	mu.Unlock()
	s.log.Info().Int("exit_code", code).Bool("interrupted", wasInterrupted).Msg("runner exited")

	if s.order != nil && len(s.opts.command) == 0 {
		status, msg := dispatch.StatusFailed, fmt.Sprintf("the runner exited with code %d without writing %s", code, dispatch.ResultFile)
		if wasInterrupted {
			status, msg = dispatch.StatusInterrupted, "the sandbox was stopped and the runner exited without writing "+dispatch.ResultFile
		}
		s.writeReceiptIfMissing(status, msg)
	}
	stopSaves()
	s.saves.Wait()
	s.shutdown()
	return code
}

func userName(a *account) string {
	if a == nil {
		return strconv.Itoa(os.Geteuid())
	}
	return a.Name
}

// loadOrder reads the work order. With an explicit command it is optional.
func (s *sandbox) loadOrder() error {
	if s.opts.workOrder == "" {
		return nil
	}
	b, err := os.ReadFile(s.opts.workOrder)
	if err != nil {
		if len(s.opts.command) > 0 && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read work order: %w", err)
	}
	var o dispatch.WorkOrder
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("work order %s: %w", s.opts.workOrder, err)
	}
	s.order = &o
	s.log = s.log.With().Str("task_id", o.TaskID).Str("mode", string(o.Mode)).Str("repo", o.Repo).Int("number", o.Number).Logger()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%s: %w", s.opts.workOrder, err)
	}
	s.order.Config.ApplyDefaults()
	return nil
}

func (s *sandbox) taskMode() bool {
	return s.order != nil && (s.order.Mode == dispatch.ModeTask || s.order.Config.Mode == sandboxcfg.ModeTask)
}

// prepare does everything between container start and the runner: the
// inner daemon and services in a coding sandbox. It returns the variables
// the runner gets on top of the sandbox's environment.
func (s *sandbox) prepare(ctx, saveCtx context.Context) (map[string]string, error) {
	env := map[string]string{}
	runtimeDir := s.opts.runtimeDir
	if err := os.MkdirAll(runtimeDir, 0o755); errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
		// An unprivileged sandbox (task mode) cannot write /run.
		runtimeDir = filepath.Join(os.TempDir(), "sandbox-run")
		err = os.MkdirAll(runtimeDir, 0o700)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", runtimeDir, err)
		}
		s.opts.runtimeDir = runtimeDir
	} else if err != nil {
		return nil, fmt.Errorf("create %s: %w", runtimeDir, err)
	}
	svcs := dispatch.Services{}
	switch {
	case s.taskMode():
		s.log.Info().Msg("task mode: no inner Docker daemon")
	case os.Getenv(envDinD) == "0":
		s.log.Info().Msg(envDinD + "=0: no inner Docker daemon")
	case os.Geteuid() != 0:
		s.log.Info().Int("uid", os.Geteuid()).Msg("not root: no inner Docker daemon (coding sandboxes need the privileged or caps profile)")
	default:
		var err error
		if svcs, err = s.startDocker(ctx, saveCtx, env); err != nil {
			return nil, err
		}
	}
	s.services = svcs
	servicesFile := filepath.Join(runtimeDir, "services.json")
	if err := writeJSONFile(servicesFile, svcs); err != nil {
		return nil, err
	}
	env[dispatch.EnvServicesFile] = servicesFile
	for name, addr := range svcs {
		env["SANDBOX_SERVICE_"+envName(name)] = addr
	}
	if err := writeEnvFile(filepath.Join(runtimeDir, "services.env"), env); err != nil {
		return nil, err
	}
	for k, v := range cacheEnv(s.opts.cacheDir) {
		env[k] = v
	}
	return env, nil
}

// startDocker brings up the inner daemon, the network and the services.
func (s *sandbox) startDocker(ctx, saveCtx context.Context, env map[string]string) (dispatch.Services, error) {
	s.docker = newDockerCLI(s.log)
	if err := prepareCgroups(s.log); err != nil {
		return nil, err
	}
	if err := removeStaleState(s.log); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dockerRoot, 0o711); err != nil {
		return nil, err
	}
	choice := chooseStorage(s.opts.storageDriver, dockerRoot, mountProber{})
	s.log.Info().Str("driver", choice.Driver).Str("backing_fs", choice.Backing).Strs("why", choice.Reasons).Msg("storage driver chosen")
	d, err := startDaemon(ctx, s.log, daemonConfig{Driver: choice.Driver, Timeout: s.opts.dockerdTimeout})
	if err != nil {
		return nil, err
	}
	s.daemon = d
	if err := s.startDockerFilter(env); err != nil {
		return nil, err
	}
	if err := s.enforceEgressDefaults(ctx, execIPTables); err != nil {
		return nil, err
	}

	cache := newImageCache(s.opts.cacheDir, s.log)
	r := &serviceRunner{docker: s.docker, log: s.log, cache: cache, getenv: os.Getenv, tmpDir: s.opts.runtimeDir}
	var specs map[string]sandboxcfg.Service
	supabase := false
	if s.order != nil {
		specs = s.order.Config.Services
		supabase = s.order.Config.Supabase
	}
	svcs, pulled, err := r.startAll(ctx, specs)
	if err != nil {
		return nil, err
	}
	if supabase {
		stack, more, err := startSupabase(ctx, r, defaultSupabaseDir)
		if err != nil {
			return nil, err
		}
		for k, v := range stack.Services {
			svcs[k] = v
		}
		for k, v := range stack.Env {
			env[k] = v
		}
		pulled = append(pulled, more...)
	}
	if err := addHosts("/etc/hosts", svcs); err != nil {
		s.log.Warn().Err(err).Msg("service names not added to /etc/hosts")
	}
	// Saving pulled images for the next run happens while the runner works;
	// a stop cancels it and the cache only ever sees complete files.
	for _, ref := range pulled {
		s.saves.Add(1)
		go func(ref string) {
			defer s.saves.Done()
			if err := cache.save(saveCtx, s.docker, ref); err != nil && saveCtx.Err() == nil {
				s.log.Warn().Err(err).Str("image", ref).Msg("image not saved to the cache")
			}
		}(ref)
	}
	return svcs, nil
}

// handOver gives the sandbox user what it must write: the output directory
// (a bind from the host) and the shared caches.
func (s *sandbox) handOver(a account) error {
	if s.order != nil && s.order.OutputDir != "" {
		if err := os.MkdirAll(s.order.OutputDir, 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
		if err := os.Lchown(s.order.OutputDir, a.UID, a.GID); err != nil {
			return fmt.Errorf("give output dir %s to %s: %w", s.order.OutputDir, a.Name, err)
		}
	}
	for _, d := range []string{"npm", "go", "pip"} {
		p := filepath.Join(s.opts.cacheDir, d)
		if isDir(p) {
			if err := os.Lchown(p, a.UID, a.GID); err != nil {
				s.log.Warn().Err(err).Str("cache", p).Msg("cache not handed to the sandbox user")
			}
		}
	}
	return nil
}

// cacheEnv points the package managers at the shared caches that are
// mounted. Their own formats tolerate concurrent users and killed writers.
func cacheEnv(dir string) map[string]string {
	env := map[string]string{}
	if isDir(filepath.Join(dir, "npm")) {
		env["npm_config_cache"] = filepath.Join(dir, "npm")
	}
	if isDir(filepath.Join(dir, "go")) {
		env["GOMODCACHE"] = filepath.Join(dir, "go", "mod")
		env["GOCACHE"] = filepath.Join(dir, "go", "build")
	}
	if isDir(filepath.Join(dir, "pip")) {
		env["PIP_CACHE_DIR"] = filepath.Join(dir, "pip")
	}
	return env
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func envName(service string) string {
	return strings.ToUpper(strings.ReplaceAll(service, "-", "_"))
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

func writeEnvFile(path string, env map[string]string) error {
	var b strings.Builder
	keys := sortedNames(env)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(env[k]))
	}
	return writeFileAtomic(path, []byte(b.String()), 0o644)
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

const hostsMarker = "# sandbox service"

// addHosts makes service names resolve in the sandbox itself, where the
// runner and the agent run (inner containers resolve them through the
// inner network's DNS).
func addHosts(path string, svcs dispatch.Services) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasSuffix(l, hostsMarker) {
			keep = append(keep, l)
		}
	}
	names := sortedNames(svcs)
	sort.Strings(names)
	for _, name := range names {
		host := svcs[name]
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "127.0.0.1" || host == "localhost" {
			continue
		}
		keep = append(keep, fmt.Sprintf("%s\t%s %s", host, name, hostsMarker))
	}
	// /etc/hosts is a bind mount from the outer runtime: write in place.
	return os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// fail ends a start that did not reach the runner: it leaves a receipt the
// bot can turn into a comment, then stops the inner daemon.
func (s *sandbox) fail(status dispatch.Status, err error) int {
	s.log.Error().Err(err).Str("status", string(status)).Msg("sandbox start failed")
	if s.order != nil {
		s.writeReceiptIfMissing(status, "sandbox start: "+err.Error())
	}
	s.saves.Wait()
	s.shutdown()
	if status == dispatch.StatusInterrupted {
		return exitInterrupted
	}
	return exitSetupFailed
}

func (s *sandbox) writeReceiptIfMissing(status dispatch.Status, msg string) {
	o := s.order
	if o.OutputDir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(o.OutputDir, dispatch.ResultFile)); err == nil {
		return
	}
	r := &dispatch.Result{
		TaskID:          o.TaskID,
		Mode:            o.Mode,
		Status:          status,
		DurationSeconds: time.Since(s.started).Seconds(),
		Branch:          o.TargetBranch,
		Error:           &dispatch.RunError{Message: msg},
	}
	if err := dispatch.WriteResult(o.OutputDir, r); err != nil {
		s.log.Error().Err(err).Msg("write fallback receipt")
		return
	}
	s.log.Info().Str("status", string(status)).Msg("fallback receipt written")
}

func (s *sandbox) shutdown() {
	s.stopDockerFilter()
	if s.egress != nil {
		s.egress.stop()
		s.egress = nil
	}
	if s.daemon != nil {
		_ = s.daemon.stop()
		s.daemon = nil
	}
}
