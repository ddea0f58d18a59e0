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
	"github.com/sandbox-bot/sandbox-bot/runner/sandboxinit/dockerfilter"
)

// sandbox is one start of the sandbox container.
type sandbox struct {
	opts    options
	log     zerolog.Logger
	started time.Time
	docker  dockerCLI
	steps   *steps

	order *dispatch.WorkOrder
	inner bool // this start runs an inner daemon
	// ipv6 is decided once, before any rule: the sandbox had IPv6 beyond
	// loopback when it started, so every fence covers IPv6 too. Without
	// it the agent may not create IPv6 networks (dockerfilter).
	ipv6     bool
	daemon   *daemon
	services dispatch.Services
	egress   *egress    // network.allow's proxy, when set
	deny     denyState  // the egress defaults (egress_deny.go)
	nf       *netfilter // the iptables variant and dockerd's rules, picked by trial (netfilter.go)
	saves    sync.WaitGroup

	dockerFilter *dockerfilter.Filter // the agent's Docker socket
	lazy         *lazyDaemon          // the daemon's socket, held until first use
}

func (s *sandbox) run(parent context.Context) int {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sig := forwardSignals(s.log, cancel)
	defer sig.stop()

	if v := os.Getenv(dispatch.EnvTaskFence); v != "" && os.Geteuid() == 0 {
		// Returns only when it could not become the sandbox user.
		if err := s.fenceTaskThenDrop(ctx, v); err != nil {
			return s.fail(dispatch.StatusFailed, fmt.Errorf("task sandbox: %w", err))
		}
	}
	if err := s.steps.do("work-order", s.loadOrder); err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	if err := checkIsolation(os.Getenv, kernelRelease()); err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	saveCtx, stopSaves := context.WithCancel(context.Background())
	defer stopSaves()

	st, err := s.start(ctx, saveCtx)
	if err != nil {
		if ctx.Err() != nil {
			return s.fail(dispatch.StatusInterrupted, fmt.Errorf("stopped while the sandbox was starting: %w", err))
		}
		return s.fail(dispatch.StatusFailed, err)
	}
	argv, runAs, caps, dir, err := s.runnerLaunch(st)
	if err != nil {
		return s.fail(dispatch.StatusFailed, err)
	}
	s.writeStartTimings(st.env)
	defer s.offerToTheBot(ctx, st)()
	runner, err := sig.startRunner(ctx, func() (*child, error) {
		return startChild(s.log, argv, childEnv(os.Environ(), runAs, st.env), dir, runAs, caps)
	})
	if err != nil {
		if ctx.Err() != nil {
			return s.fail(dispatch.StatusInterrupted, errors.New("stopped before the runner started"))
		}
		return s.fail(dispatch.StatusFailed, err)
	}
	s.log.Info().Strs("argv", argv).Str("user", userName(runAs)).Str("agent_user", userName(st.agent)).
		Str("steps", s.steps.String()).
		Float64("ready_seconds", time.Since(s.started).Seconds()).Msg("runner started")

	<-runner.done
	code, wasInterrupted := runner.code, sig.wasInterrupted()
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

// runnerLaunch is how the runner starts: its command, its identity and
// capabilities (the agent's when the image has no runner user), and its
// working directory.
func (s *sandbox) runnerLaunch(st started) (argv []string, runAs *account, caps []uintptr, dir string, err error) {
	argv = s.opts.command
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
func (s *sandbox) start(ctx, saveCtx context.Context) (started, error) {
	st := started{env: map[string]string{}}
	if err := s.makeRuntimeDir(); err != nil {
		return st, err
	}
	s.inner = s.wantsInnerDaemon()
	s.ipv6 = hasIPv6()
	if os.Geteuid() == 0 {
		a, err := lookupAccount(s.opts.user)
		if err != nil {
			return st, err
		}
		st.agent = &a
	}
	dockerEnv, filterEnv, gatewayEnv := map[string]string{}, map[string]string{}, map[string]string{}
	parts := map[string]func(context.Context) error{
		"docker": func(ctx context.Context) error { return s.prepare(ctx, saveCtx, dockerEnv) },
		"identities": func(context.Context) error {
			// The gateway reads its providers file before the runner's
			// identity takes the secrets directory out of everyone's reach
			// but the runner's. It serves for the whole run, so it gets
			// the run's context, not this step's.
			if err := s.steps.do("gateway", func() error { return s.startGateway(ctx, st.agent, gatewayEnv) }); err != nil {
				return err
			}
			if st.agent == nil {
				return nil
			}
			a := *st.agent
			if err := s.handOver(a); err != nil {
				return err
			}
			if len(s.opts.command) > 0 {
				return nil
			}
			var err error
			st.runner, err = s.separateRunner(a)
			return err
		},
	}
	if s.inner {
		parts["docker-filter"] = func(context.Context) error { return s.startDockerFilter(filterEnv) }
	}
	if err := s.steps.parallel(ctx, parts); err != nil {
		return st, err
	}
	maps.Copy(st.env, dockerEnv)
	maps.Copy(st.env, filterEnv)
	if err := s.writeServicesFiles(st.env); err != nil {
		return st, err
	}
	maps.Copy(st.env, cacheEnv(s.opts.cacheDir))
	s.prepareSetupCache(st.runner, st.env)
	if fi, err := os.Stat(dispatch.OSVMount); err == nil && fi.IsDir() {
		st.env[dispatch.EnvOSVDir] = dispatch.OSVMount
	}
	maps.Copy(st.env, gatewayEnv)
	if s.order != nil && len(s.order.Config.Network.Allow) > 0 {
		var env map[string]string
		err := s.steps.do("egress-allow", func() (err error) {
			env, err = s.startEgress(ctx, st.agent, execIPTables)
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
func (s *sandbox) wantsInnerDaemon() bool {
	switch {
	case s.taskMode():
		s.log.Info().Msg("task mode: no inner Docker daemon")
	case os.Getenv(envDinD) == "0":
		s.log.Info().Msg(envDinD + "=0: no inner Docker daemon")
	case os.Geteuid() != 0:
		s.log.Info().Int("uid", os.Geteuid()).Msg("not root: no inner Docker daemon (coding sandboxes need the privileged or caps profile)")
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
	if err := o.Config.Check(); err != nil {
		return fmt.Errorf("%s: config: %w", s.opts.workOrder, err)
	}
	return nil
}

func (s *sandbox) taskMode() bool {
	return s.order != nil && s.order.TaskSandbox()
}
