package sandboxinit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// sandbox is one start of the sandbox container. Until its work order is
// read it is the init alone; bringUp then holds the parts built from it.
type sandbox struct {
	opts    options
	log     zerolog.Logger
	started time.Time
	steps   *steps
}

func (s *sandbox) run(parent context.Context) int {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sig := forwardSignals(s.log, cancel)
	defer sig.stop()

	end := fallbackReceipt{log: s.log, started: s.started}
	if v := os.Getenv(dispatch.EnvTaskFence); v != "" && os.Geteuid() == 0 {
		// Returns only when it could not become the sandbox user.
		if err := fenceTaskThenDrop(ctx, s.log, v); err != nil {
			return end.fail(dispatch.StatusFailed, fmt.Errorf("task sandbox: %w", err), nothingStarted)
		}
	}
	var order *dispatch.WorkOrder
	log := s.log
	err := s.steps.do("work-order", func() (err error) {
		order, log, err = loadOrder(s.opts, s.log)
		return err
	})
	end = fallbackReceipt{log: log, order: order, started: s.started}
	if err != nil {
		return end.fail(dispatch.StatusFailed, err, nothingStarted)
	}
	if err := checkIsolation(os.Getenv, kernelRelease()); err != nil {
		return end.fail(dispatch.StatusFailed, err, nothingStarted)
	}
	saveCtx, stopSaves := context.WithCancel(context.Background())
	defer stopSaves()

	opts := s.opts
	if opts.runtimeDir, err = makeRuntimeDir(opts.runtimeDir); err != nil {
		return end.failStart(ctx, err, nothingStarted)
	}
	up := newBringUp(opts, log, s.started, s.steps, order, wantsInnerDaemon(log, order), hasIPv6())
	return up.run(ctx, saveCtx, stopSaves, sig)
}

// bringUp brings the sandbox up for the runner from its work order, runs
// the runner, and takes the sandbox down after it. Its parts are built
// once the work order is read and the start's facts (the runtime
// directory, whether an inner daemon runs, IPv6) are decided.
type bringUp struct {
	opts    options
	log     zerolog.Logger
	started time.Time
	steps   *steps
	order   *dispatch.WorkOrder
	inner   bool // this start runs an inner daemon
	end     fallbackReceipt

	timings *startTimings
	allow   *egressAllow // network.allow's proxy and fence
	docker  *innerDocker // the inner daemon and the services (or the egress defaults alone)
	filter  *agentDocker // the agent's Docker socket
	ids     identities   // the runner's and the agent's files
}

// newBringUp builds the start's parts. ipv6 is decided once, before any
// rule: the sandbox had IPv6 beyond loopback when it started, so every
// fence covers IPv6 too. Without it the agent may not create IPv6
// networks (dockerfilter).
func newBringUp(opts options, log zerolog.Logger, started time.Time, steps *steps, order *dispatch.WorkOrder, inner, ipv6 bool) *bringUp {
	timings := &startTimings{log: log, started: started, steps: steps, file: opts.runtimeDir + "/start-timings.json"}
	defaults := &egressDefaults{log: log, order: order, inner: inner, ipv6: ipv6}
	allow := &egressAllow{log: log, order: order, inner: inner, ipv6: ipv6, defaults: defaults}
	return &bringUp{
		opts: opts, log: log, started: started, steps: steps, order: order, inner: inner,
		end:     fallbackReceipt{log: log, order: order, started: started},
		timings: timings,
		allow:   allow,
		docker: &innerDocker{opts: opts, log: log, order: order, inner: inner, steps: steps, docker: newDockerCLI(log),
			defaults: defaults, allow: allow, timings: timings},
		filter: &agentDocker{opts: opts, log: log, ipv6: ipv6},
		ids:    identities{opts: opts, log: log, order: order},
	}
}

// run brings the sandbox up, runs the runner until it exits, and takes
// the sandbox down; it returns the runner's exit code.
func (u *bringUp) run(ctx, saveCtx context.Context, stopSaves context.CancelFunc, sig *signals) int {
	st, err := u.start(ctx, saveCtx)
	if err != nil {
		return u.end.failStart(ctx, err, u.stop)
	}
	argv, runAs, caps, dir, err := u.runnerLaunch(st)
	if err != nil {
		return u.end.fail(dispatch.StatusFailed, err, u.stop)
	}
	u.timings.write(st.env)
	defer offerToTheBot(ctx, u.log, u.order, st)()
	runner, err := sig.startRunner(ctx, func() (*child, error) {
		return startChild(u.log, argv, childEnv(os.Environ(), runAs, st.env), dir, runAs, caps)
	})
	if err != nil {
		if ctx.Err() != nil {
			return u.end.fail(dispatch.StatusInterrupted, errors.New("stopped before the runner started"), u.stop)
		}
		return u.end.fail(dispatch.StatusFailed, err, u.stop)
	}
	u.log.Info().Strs("argv", argv).Str("user", userName(runAs)).Str("agent_user", userName(st.agent)).
		Str("steps", u.steps.String()).
		Float64("ready_seconds", time.Since(u.started).Seconds()).Msg("runner started")

	<-runner.done
	code, wasInterrupted := runner.code, sig.wasInterrupted()
	u.log.Info().Int("exit_code", code).Bool("interrupted", wasInterrupted).Msg("runner exited")

	if u.order != nil && len(u.opts.command) == 0 {
		status, msg := dispatch.StatusFailed, fmt.Sprintf("the runner exited with code %d without writing %s", code, dispatch.ResultFile)
		if wasInterrupted {
			status, msg = dispatch.StatusInterrupted, "the sandbox was stopped and the runner exited without writing "+dispatch.ResultFile
		}
		u.end.writeIfMissing(status, msg)
	}
	stopSaves()
	u.stop()
	return code
}

// stop waits for the image saves and stops what the start started: the
// agent's Docker socket, the egress proxy, the inner daemon.
func (u *bringUp) stop() {
	u.docker.saves.Wait()
	u.filter.stop()
	u.allow.stop()
	u.docker.stop()
}

// runnerLaunch is how the runner starts: its command, its identity and
// capabilities (the agent's when the image has no runner user), and its
// working directory.
func (u *bringUp) runnerLaunch(st started) (argv []string, runAs *account, caps []uintptr, dir string, err error) {
	argv = u.opts.command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, nil, "", fmt.Errorf("find own executable: %w", err)
		}
		argv = []string{exe, "run"}
	}
	runAs = st.agent
	if st.runner != nil {
		runAs, caps = &st.runner.acct, runnerCaps
		maps.Copy(st.env, st.runner.env)
	}
	dir = "/"
	if runAs != nil && isDir(runAs.Home) {
		dir = runAs.Home
	}
	return argv, runAs, caps, dir, nil
}

// signals handles the init's signals: until the runner runs, a signal
// aborts the start; afterwards it is forwarded to the runner, whose to
// handle it is.
type signals struct {
	log         zerolog.Logger
	ch          chan os.Signal
	mu          sync.Mutex
	runner      *child
	interrupted bool
}

func forwardSignals(log zerolog.Logger, abortStart context.CancelFunc) *signals {
	s := &signals{log: log, ch: make(chan os.Signal, 8)}
	signal.Notify(s.ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for sig := range s.ch {
			s.mu.Lock()
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				s.interrupted = true
			}
			if s.runner != nil {
				s.log.Info().Str("signal", sig.String()).Msg("forwarding to the runner")
				_ = s.runner.cmd.Process.Signal(sig)
			} else {
				s.log.Info().Str("signal", sig.String()).Msg("signal during start: stopping")
				abortStart()
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *signals) stop() { signal.Stop(s.ch) }

// startRunner starts the runner unless a signal stopped the start first;
// from then on signals go to it.
func (s *signals) startRunner(ctx context.Context, start func() (*child, error)) (*child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := start()
	s.runner = c
	return c, err
}

func (s *signals) wasInterrupted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interrupted
}

// started is what the start hands the runner.
type started struct {
	env    map[string]string // on top of the sandbox's environment
	agent  *account          // the agent's account; nil when the init is not root
	runner *runnerIdentity   // the runner's own identity; nil when it shares the agent's
}

// start does everything between container start and the runner. The
// parts that do not depend on each other run at once: the inner daemon
// and the services (the egress defaults are in place before the daemon
// starts), the agent's Docker socket, and the model gateway followed by
// the identities. The allowlist comes last: its fence would cut services
// off while they start, and its proxy variables name them.
func (u *bringUp) start(ctx, saveCtx context.Context) (started, error) {
	st := started{env: map[string]string{}}
	if os.Geteuid() == 0 {
		a, err := lookupAccount(u.opts.user)
		if err != nil {
			return st, err
		}
		st.agent = &a
	}
	dockerEnv, filterEnv, gatewayEnv := map[string]string{}, map[string]string{}, map[string]string{}
	svcs := dispatch.Services{}
	parts := map[string]func(context.Context) error{
		"docker": func(ctx context.Context) (err error) {
			svcs, err = u.docker.prepare(ctx, saveCtx, dockerEnv)
			return err
		},
		"identities": func(context.Context) error {
			// The gateway reads its providers file before the runner's
			// identity takes the secrets directory out of everyone's reach
			// but the runner's. It serves for the whole run, so it gets
			// the run's context, not this step's.
			if err := u.steps.do("gateway", func() error { return startGateway(ctx, u.log, u.order, st.agent, gatewayEnv) }); err != nil {
				return err
			}
			if st.agent == nil {
				return nil
			}
			a := *st.agent
			if err := u.ids.handOver(a); err != nil {
				return err
			}
			if len(u.opts.command) > 0 {
				return nil
			}
			var err error
			st.runner, err = u.ids.separateRunner(a)
			return err
		},
	}
	if u.inner {
		parts["docker-filter"] = func(context.Context) error { return u.filter.start(filterEnv) }
	}
	if err := u.steps.parallel(ctx, parts); err != nil {
		return st, err
	}
	maps.Copy(st.env, dockerEnv)
	maps.Copy(st.env, filterEnv)
	if err := writeServicesFiles(u.opts.runtimeDir, svcs, st.env); err != nil {
		return st, err
	}
	maps.Copy(st.env, cacheEnv(u.opts.cacheDir))
	prepareSetupCache(u.log, u.order, st.runner, st.env)
	if fi, err := os.Stat(dispatch.OSVMount); err == nil && fi.IsDir() {
		st.env[dispatch.EnvOSVDir] = dispatch.OSVMount
	}
	maps.Copy(st.env, gatewayEnv)
	if u.allow.set() {
		var env map[string]string
		err := u.steps.do("egress-allow", func() (err error) {
			env, err = u.allow.start(ctx, st.agent, execIPTables, svcs)
			return err
		})
		if err != nil {
			return st, err
		}
		maps.Copy(st.env, env)
	}
	return st, nil
}

// wantsInnerDaemon decides, and logs why not, whether this start runs an
// inner Docker daemon.
func wantsInnerDaemon(log zerolog.Logger, order *dispatch.WorkOrder) bool {
	switch {
	case taskMode(order):
		log.Info().Msg("task mode: no inner Docker daemon")
	case os.Getenv(envDinD) == "0":
		log.Info().Msg(envDinD + "=0: no inner Docker daemon")
	case os.Geteuid() != 0:
		log.Info().Int("uid", os.Geteuid()).Msg("not root: no inner Docker daemon (coding sandboxes need the privileged or caps profile)")
	default:
		return true
	}
	return false
}

func userName(a *account) string {
	if a == nil {
		return strconv.Itoa(os.Geteuid())
	}
	return a.Name
}

// loadOrder reads the work order. With an explicit command it is optional.
// The log it returns names the order's task; an order that does not
// validate is returned with the error, for the receipt that says so.
func loadOrder(opts options, log zerolog.Logger) (*dispatch.WorkOrder, zerolog.Logger, error) {
	if opts.workOrder == "" {
		return nil, log, nil
	}
	b, err := os.ReadFile(opts.workOrder)
	if err != nil {
		if len(opts.command) > 0 && errors.Is(err, os.ErrNotExist) {
			return nil, log, nil
		}
		return nil, log, fmt.Errorf("read work order: %w", err)
	}
	var o dispatch.WorkOrder
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, log, fmt.Errorf("work order %s: %w", opts.workOrder, err)
	}
	log = log.With().Str("task_id", o.TaskID).Str("mode", string(o.Mode)).Str("repo", o.Repo).Int("number", o.Number).Logger()
	if err := o.Validate(); err != nil {
		return &o, log, fmt.Errorf("%s: %w", opts.workOrder, err)
	}
	if err := o.Config.Check(); err != nil {
		return &o, log, fmt.Errorf("%s: config: %w", opts.workOrder, err)
	}
	return &o, log, nil
}

func taskMode(order *dispatch.WorkOrder) bool {
	return order != nil && order.TaskSandbox()
}
