package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// Names on the inner daemon.
const (
	innerNetwork = "sandbox"
	labelService = "org.sandbox-bot.service"
	labelManaged = "org.sandbox-bot.managed"
)

// serviceRunner starts the services of .sandbox.yml on the inner daemon.
type serviceRunner struct {
	docker dockerCLI
	engine engine // the calls on the critical path (engine.go)
	steps  *steps // nil: not timed
	log    zerolog.Logger
	cache  imageCache
	getenv func(string) string
}

// removeStale removes service containers a previous start of this sandbox
// left (their names would clash). Only a restarted container has any, so
// a fresh /var/lib/docker skips the docker call.
func (r *serviceRunner) removeStale(ctx context.Context) error {
	if entries, err := os.ReadDir(filepath.Join(dockerRoot, "containers")); err == nil && len(entries) == 0 || os.IsNotExist(err) {
		return nil
	}
	out, err := r.docker.run(ctx, "ps", "-aq", "--filter", "label="+labelService)
	if err != nil {
		return err
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		if _, err := r.docker.run(ctx, append([]string{"rm", "-f"}, ids...)...); err != nil {
			return err
		}
		r.log.Info().Int("containers", len(ids)).Msg("service containers of a previous start removed")
	}
	return nil
}

// ensureNetwork creates the inner network the services share.
func (r *serviceRunner) ensureNetwork(ctx context.Context) error {
	err := r.engine.createNetwork(ctx, innerNetwork, map[string]string{labelManaged: "true"})
	if errors.Is(err, errConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the inner network %q: %w", innerNetwork, err)
	}
	return nil
}

// startAll starts every service and probes their health in parallel. It
// returns each service's address and the images it had to pull (candidates
// for the image cache).
func (r *serviceRunner) startAll(ctx context.Context, specs map[string]sandboxcfg.ResolvedService) (dispatch.Services, []string, error) {
	addrs := dispatch.Services{}
	if err := r.removeStale(ctx); err != nil {
		return nil, nil, err
	}
	// The network is created while images load: both take a docker round
	// trip or more, and a service needs both only when it starts.
	netDone := make(chan error, 1)
	go func() { netDone <- r.steps.do("network", func() error { return r.ensureNetwork(ctx) }) }()
	network := sync.OnceValue(func() error { return <-netDone })
	if len(specs) == 0 {
		return addrs, nil, network()
	}
	var (
		mu     sync.Mutex
		pulled []string
	)
	starts := map[string]func(context.Context) error{}
	for name, spec := range specs {
		// The first failure stops the others (steps.parallel cancels
		// their context): the run cannot go on without every service.
		starts["service:"+name] = func(ctx context.Context) error {
			start := time.Now()
			addr, didPull, err := r.startOne(ctx, name, spec, network)
			if err != nil {
				return fmt.Errorf("service %s: %w", name, err)
			}
			mu.Lock()
			addrs[name] = addr
			if didPull {
				pulled = append(pulled, spec.Image)
			}
			mu.Unlock()
			r.log.Info().Str("service", name).Str("addr", addr).Dur("took", time.Since(start)).Msg("service healthy")
			return nil
		}
	}
	err := r.steps.parallel(ctx, starts)
	if perr := ctx.Err(); perr != nil {
		return nil, nil, perr
	}
	if err != nil {
		return nil, nil, err
	}
	return addrs, pulled, nil
}

// containerName is the service's container on the inner daemon: its own
// name, so `docker logs redis` works for the agent, except that Docker
// wants at least two characters.
func containerName(service string) string {
	if len(service) < 2 {
		return "service-" + service
	}
	return service
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r *serviceRunner) startOne(ctx context.Context, name string, spec sandboxcfg.ResolvedService, network func() error) (string, bool, error) {
	var pulled bool
	err := r.steps.do("image:"+name, func() (err error) {
		pulled, err = r.ensureImage(ctx, spec.Image)
		return err
	})
	if err != nil {
		return "", false, err
	}
	if err := r.steps.do("network-wait:"+name, network); err != nil {
		return "", false, err
	}
	env, err := serviceEnv(name, spec.Env, r.getenv)
	if err != nil {
		return "", false, err
	}
	c := serviceContainer{
		Name: containerName(name), Hostname: name, Image: spec.Image,
		Network: innerNetwork, Aliases: []string{name},
		Labels:      map[string]string{labelService: name},
		StopTimeout: 2,
		Cmd:         spec.Command,
		Env:         env,
	}
	if err := r.steps.do("run:"+name, func() error { return r.engine.run(ctx, c) }); err != nil {
		return "", false, err
	}
	st, err := r.engine.inspect(ctx, containerName(name))
	if err != nil {
		return "", false, err
	}
	ip := st.NetworkSettings.Networks[innerNetwork].IPAddress
	if net.ParseIP(ip) == nil {
		// A container that exited at once has no address any more.
		if err := r.alive(ctx, name); err != nil {
			return "", false, fmt.Errorf("%w; last log lines:\n%s", err, r.logsTail(name))
		}
		return "", false, fmt.Errorf("container has no address on the %s network (got %q)", innerNetwork, ip)
	}
	p, err := probeFor(r.docker, name, ip, spec)
	if err != nil {
		return "", false, err
	}
	timeout := time.Duration(spec.Healthcheck.TimeoutSeconds) * time.Second
	err = r.steps.do("healthy:"+name, func() error {
		return waitHealthy(ctx, p, timeout, func(ctx context.Context) error { return r.alive(ctx, name) })
	})
	if err != nil {
		return "", false, fmt.Errorf("%w; last log lines:\n%s", err, r.logsTail(name))
	}
	addr := ip
	if len(spec.Ports) > 0 {
		addr = net.JoinHostPort(ip, strconv.Itoa(spec.Ports[0]))
	}
	return addr, pulled, nil
}

// alive fails once the service container is no longer running.
func (r *serviceRunner) alive(ctx context.Context, name string) error {
	st, err := r.engine.inspect(ctx, containerName(name))
	if err != nil {
		return err
	}
	switch st.State.Status {
	case "running", "created", "":
		return nil
	case "exited":
		return fmt.Errorf("container exited with code %d", st.State.ExitCode)
	default:
		return fmt.Errorf("container is %s (exit code %d)", st.State.Status, st.State.ExitCode)
	}
}

func (r *serviceRunner) logsTail(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := r.docker.combined(ctx, "logs", "--tail", "20", containerName(name))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(out)
}

// ensureImage makes ref available: already loaded, else from the image
// cache, else pulled. It reports whether it pulled.
func (r *serviceRunner) ensureImage(ctx context.Context, ref string) (bool, error) {
	// In a fresh /var/lib/docker the cache is the likely source, so it is
	// tried first; loading an image that is there already costs little.
	loaded, err := r.cache.load(ctx, r.engine, ref)
	if loaded {
		r.log.Info().Str("image", ref).Msg("image loaded from the cache")
		return false, nil
	}
	if _, err := r.engine.imageID(ctx, ref); err == nil {
		return false, nil
	}
	if err != nil {
		r.log.Warn().Err(err).Str("image", ref).Msg("image cache entry refused; pulling instead")
	}
	if _, perr := r.docker.run(ctx, "pull", "--quiet", ref); perr != nil {
		where := "no image cache is mounted"
		switch {
		case err != nil:
			where = "its cached copy was refused (" + err.Error() + ")"
		case r.cache.dir != "":
			where = "it is not in the image cache " + r.cache.dir
		}
		return false, fmt.Errorf("image %s: %s and pulling it failed: %w", ref, where, perr)
	}
	r.cache.recordPulled(ctx, r.engine, ref)
	return true, nil
}

var braceVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandSecrets replaces ${VAR} with the value from the sandbox's
// environment (where secrets given to the run are), leaving $VAR and
// {service} alone.
func expandSecrets(v string, getenv func(string) string) string {
	return braceVar.ReplaceAllStringFunc(v, func(m string) string {
		return getenv(m[2 : len(m)-1])
	})
}

// serviceEnv is a service's environment with ${VAR} expanded. It goes to
// the daemon in the create request, never in a command line.
func serviceEnv(name string, env map[string]string, getenv func(string) string) ([]string, error) {
	var out []string
	for _, k := range sortedNames(env) {
		v := expandSecrets(env[k], getenv)
		if k == "" || strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
			return nil, fmt.Errorf("services.%s.env.%s: names cannot be empty or hold = or newlines, values cannot hold newlines", name, k)
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}
