package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// makeRuntimeDir creates the directory of what the init hands the runner,
// dir or, where an unprivileged sandbox cannot write it, one of its own,
// and returns which.
func makeRuntimeDir(dir string) (string, error) {
	err := os.MkdirAll(dir, 0o755)
	if errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
		// An unprivileged sandbox (task mode) cannot write /run.
		own := filepath.Join(os.TempDir(), "sandbox-run")
		if err := os.MkdirAll(own, 0o700); err != nil {
			return dir, fmt.Errorf("create %s: %w", own, err)
		}
		return own, nil
	}
	if err != nil {
		return dir, fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

// innerDocker is the inner Docker daemon of a coding sandbox and the
// services of .sandbox.yml on it: started before the runner when there
// are services, else on the first use of Docker. Without an inner daemon
// it installs the egress defaults alone.
type innerDocker struct {
	opts     options
	log      zerolog.Logger
	order    *dispatch.WorkOrder
	inner    bool // this start runs an inner daemon
	steps    *steps
	docker   dockerCLI
	defaults *egressDefaults
	allow    *egressAllow
	timings  *startTimings

	daemon *daemon        // started before the runner
	lazy   *lazyDaemon    // the daemon's socket, held until first use
	saves  sync.WaitGroup // pulled images being saved to the cache
}

// prepare brings up the inner daemon and the services in a coding sandbox,
// or only the egress defaults without one, and returns the services'
// addresses. env gets what the services give the runner (Supabase's
// keys).
func (dk *innerDocker) prepare(ctx, saveCtx context.Context, env map[string]string) (dispatch.Services, error) {
	if !dk.inner {
		return dispatch.Services{}, dk.steps.do("egress-defaults", func() error { return dk.defaults.enforce(ctx, execIPTables) })
	}
	return dk.startDocker(ctx, saveCtx, env)
}

// writeServicesFiles writes the services' addresses for the runner (JSON)
// and for a person in the sandbox (services.env, with what else the start
// gave the runner so far) in runtimeDir and adds their variables to env.
func writeServicesFiles(runtimeDir string, svcs dispatch.Services, env map[string]string) error {
	servicesFile := filepath.Join(runtimeDir, "services.json")
	if err := writeJSONFile(servicesFile, svcs); err != nil {
		return err
	}
	env[dispatch.EnvServicesFile] = servicesFile
	for name, addr := range svcs {
		env["SANDBOX_SERVICE_"+envName(name)] = addr
	}
	return writeEnvFile(filepath.Join(runtimeDir, "services.env"), env)
}

// startDocker brings up the inner daemon, the network and the services.
// containerd starts as soon as the stale state is gone; the storage probe
// and the egress defaults run while it does, and dockerd starts once the
// driver is known. The egress defaults are in place before dockerd, so
// nothing the daemon starts ever runs without them.
func (dk *innerDocker) startDocker(ctx, saveCtx context.Context, env map[string]string) (dispatch.Services, error) {
	if err := dk.steps.do("cgroups", func() error { return prepareCgroups(dk.log) }); err != nil {
		return nil, err
	}
	err := dk.steps.do("stale-state", func() error {
		if err := removeStaleState(dk.log); err != nil {
			return err
		}
		return os.MkdirAll(dockerRoot, 0o711)
	})
	if err != nil {
		return nil, err
	}
	if !dk.wantsDaemonNow() {
		err := dk.steps.do("egress-defaults", func() error { return dk.defaults.enforce(ctx, execIPTables) })
		if err != nil {
			return nil, err
		}
		// The daemon started on first use is held to network.allow like
		// one started now: fenced before the runner, proxied when it runs.
		if err := dk.fenceDaemonForAllow(ctx); err != nil {
			return nil, err
		}
		// The held socket outlives this step: it waits until the runner
		// has exited, like the image saves.
		return dispatch.Services{}, dk.holdDockerSocket(saveCtx)
	}
	err = dk.steps.do("containerd", func() (err error) {
		dk.daemon, err = startContainerd(dk.log)
		return err
	})
	if err != nil {
		return nil, err
	}
	var choice storageChoice
	err = dk.steps.parallel(ctx, map[string]func(context.Context) error{
		"storage": func(context.Context) error {
			choice = chooseStorage(dk.opts.storageDriver, dockerRoot, mountProber{})
			dk.log.Info().Str("driver", choice.Driver).Str("backing_fs", choice.Backing).Strs("why", choice.Reasons).Msg("storage driver chosen")
			return nil
		},
		"egress-defaults": func(ctx context.Context) error { return dk.defaults.enforce(ctx, execIPTables) },
	})
	if err != nil {
		return nil, err
	}
	if err := dk.fenceDaemonForAllow(ctx); err != nil {
		return nil, err
	}
	dcfg, err := dk.daemonConfig(ctx, choice.Driver)
	if err != nil {
		return nil, err
	}
	err = dk.steps.do("dockerd", func() error { return dk.daemon.startDockerd(ctx, dcfg) })
	if err != nil {
		return nil, err
	}
	var svcs dispatch.Services
	err = dk.steps.do("services", func() (err error) {
		svcs, err = dk.startServices(ctx, saveCtx, env)
		return err
	})
	return svcs, err
}

// startServices starts the services of .sandbox.yml (and Supabase) on the
// inner daemon.
func (dk *innerDocker) startServices(ctx, saveCtx context.Context, env map[string]string) (dispatch.Services, error) {
	cache := newImageCache(dk.opts.cacheDir, dk.log)
	r := &serviceRunner{docker: dk.docker, engine: newEngine(dk.log), steps: dk.steps, log: dk.log, cache: cache, getenv: os.Getenv}
	var specs map[string]sandboxcfg.ResolvedService
	supabase := false
	if dk.order != nil {
		specs = dk.order.Config.Services
		supabase = dk.order.Config.Supabase
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
	if err := r.engine.checkNoSocketHolder(ctx); err != nil {
		return nil, err
	}
	if err := addHosts("/etc/hosts", svcs); err != nil {
		dk.log.Warn().Err(err).Msg("service names not added to /etc/hosts")
	}
	// Saving pulled images for the next run happens while the runner works;
	// a stop cancels it and the cache only ever sees complete files.
	for _, ref := range pulled {
		dk.saves.Add(1)
		go func(ref string) {
			defer dk.saves.Done()
			if err := cache.save(saveCtx, dk.docker, ref); err != nil && saveCtx.Err() == nil {
				dk.log.Warn().Err(err).Str("image", ref).Msg("image not saved to the cache")
			}
		}(ref)
	}
	return svcs, nil
}

// fenceDaemonForAllow, with network.allow set, starts the egress proxy and
// fences the daemon's group before the daemon runs: its pulls, pushes and
// fetches go through the proxy, whether it starts now or on first use.
func (dk *innerDocker) fenceDaemonForAllow(ctx context.Context) error {
	if !dk.allow.set() {
		return nil
	}
	return dk.steps.do("egress-daemon", func() error { return dk.allow.fenceDaemon(ctx, execIPTables) })
}

// daemonConfig is how dockerd starts, now or on first use: its subnets
// are chosen here, so a run that never uses Docker never asks for them.
func (dk *innerDocker) daemonConfig(ctx context.Context, driver string) (daemonConfig, error) {
	nf := dk.defaults.netfilter()
	hosts, _ := os.ReadFile("/etc/hosts")
	nets, err := innerNetworks(ctx, execIPTables, string(hosts))
	if err != nil {
		return daemonConfig{}, fmt.Errorf("choose the inner daemon's networks, clear of the host's addresses: %w", err)
	}
	c := daemonConfig{Driver: driver, Timeout: dk.opts.dockerdTimeout, Nets: nets, Args: nf.daemonArgs()}
	env, err := nf.daemonEnv()
	if err != nil {
		return c, err
	}
	c.Env = env
	if dk.allow.set() {
		c.Env, c.GID = append(c.Env, daemonProxyEnv()...), daemonGID
	}
	return c, nil
}
