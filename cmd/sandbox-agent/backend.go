package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
)

// sandboxHost is the host's name inside a sandbox (--add-host
// host.docker.internal:host-gateway), where the served repository is.
const sandboxHost = "host.docker.internal"

// dockerOptions resolves the image, the isolation profile and the
// variables passed to sandboxes from flags and environment.
func (c *cli) dockerOptions(o *options, f flags) error {
	o.image = firstSet(f.image, c.getenv(envImage), defaultImage)
	iso, err := dispatch.ParseIsolation(firstSet(f.isolation, c.getenv(envIsolation)))
	if err != nil {
		return fmt.Errorf("--isolation (or $%s) %w", envIsolation, err)
	}
	o.isolation = iso
	o.isolationChosen = f.isolation != "" || c.getenv(envIsolation) != ""
	o.providers = f.providers
	if len(o.providers) == 0 {
		for _, v := range strings.Fields(c.getenv(envProviders)) {
			p, err := dispatch.ParseProvider(v)
			if err != nil {
				return fmt.Errorf("$%s: %w", envProviders, err)
			}
			o.providers = append(o.providers, p)
		}
	}
	switch o.backend {
	case "auto", "process", "docker":
	default:
		return fmt.Errorf("--backend %q is not auto, process or docker", o.backend)
	}
	if f.passEnv == "" {
		for _, n := range defaultPassEnv {
			if c.getenv(n) != "" {
				o.passEnv = append(o.passEnv, n)
			}
		}
		return nil
	}
	for _, n := range strings.Split(f.passEnv, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := c.lookupEnv(n); !ok {
			return fmt.Errorf("--pass-env %s: not set in this environment", n)
		}
		if n == envTokenVar {
			return fmt.Errorf("--pass-env %s: %s", n, errTokenPassEnv)
		}
		o.passEnv = appendNew(o.passEnv, n)
	}
	return nil
}

func (c *cli) lookupEnv(k string) (string, bool) {
	for i := len(c.env) - 1; i >= 0; i-- {
		if strings.HasPrefix(c.env[i], k+"=") {
			return c.env[i][len(k)+1:], true
		}
	}
	return "", false
}

// newBackend picks where runs happen: a docker sandbox when the engine and
// the image are there, else (with --backend auto) a plain child process
// after a loud warning. The returned func releases what the backend holds
// (the repository server).
func (c *cli) newBackend(ctx context.Context, o *options) (dispatch.Backend, func(), error) {
	nop := func() {}
	switch o.backend {
	case "docker":
		if err := c.dockerReady(ctx, o); err != nil {
			return nil, nop, fmt.Errorf("--backend docker: %w", err)
		}
		return c.dockerBackend(ctx, o)
	case "auto":
		if err := c.dockerReady(ctx, o); err != nil {
			c.warnNoSandbox(err)
			b, err := c.processBackend(o)
			return b, nop, err
		}
		return c.dockerBackend(ctx, o)
	default:
		b, err := c.processBackend(o)
		return b, nop, err
	}
}

// dockerReady says why the docker backend cannot run, and how to fix it.
func (c *cli) dockerReady(ctx context.Context, o *options) error {
	if err := c.dockerAvailable(ctx); err != nil {
		return fmt.Errorf("no Docker engine (%v); start one, or run as a user allowed to use it", err)
	}
	if err := c.imageExists(ctx, o.image); err != nil {
		return fmt.Errorf("no sandbox image %s on the Docker engine; build it with deploy/sandbox/build --local (or set $%s to one you have)", o.image, envImage)
	}
	return nil
}

func (c *cli) warnNoSandbox(reason error) {
	line := strings.Repeat("*", 78)
	fmt.Fprintf(c.stderr, "\n%s\n*  WARNING: no sandbox. --backend auto found no Docker sandbox to use:\n*    %v\n"+
		"*  The agent runs as a plain child process of sandbox-agent, with your files,\n"+
		"*  network and credentials in reach. Use it only on repositories you trust.\n%s\n\n", line, reason, line)
}

func (c *cli) processBackend(o *options) (dispatch.Backend, error) {
	if o.runnerErr != nil {
		return nil, o.runnerErr
	}
	// The same allowlisted environment the bot gives, without the
	// repository token (the runner gets it as its token file): the agent
	// sees your provider keys only when they are pass-env names.
	env := process.MinimalEnv(withoutTokenVar(c.env), o.passEnv)
	// Plan rounds run as separate tasks, one after the other; a shared
	// checkout and state directory let a revision continue the same agent
	// session (OpenCode continues a session only in the directory it was
	// made in).
	env = append(env,
		"SANDBOX_STATE_DIR="+filepath.Join(o.dataDir, "agent-state"),
		"SANDBOX_WORKSPACE="+filepath.Join(o.dataDir, "workspace"))
	if o.envFile != "" {
		abs, err := filepath.Abs(o.envFile)
		if err != nil {
			return nil, err
		}
		env = append(env, "SANDBOX_ENV_FILE="+abs)
	}
	b, err := process.New(process.Options{Runner: o.runner, DataDir: o.dataDir, Env: env, Warnings: c.stderr})
	if err != nil {
		return nil, err
	}
	o.outDir = b.OutputDir
	return b, nil
}

// dockerBackend runs each run in a sandbox container. A local repository
// is served to it over HTTP on the bridge gateway for as long as the
// command runs, with a fresh token delivered as the run's token file.
func (c *cli) dockerBackend(ctx context.Context, o *options) (dispatch.Backend, func(), error) {
	nop := func() {}
	if o.envFile != "" {
		return nil, nop, errors.New("--env-file is not passed into docker sandboxes; use --backend process, or put the variables in .sandbox.yml env with ${VAR} and --pass-env")
	}
	env, gw, err := c.sandboxEnv(o)
	if err != nil {
		return nil, nop, err
	}
	deny, err := dispatch.ParseDenyNets(c.getenv(envDenyNetworks))
	if err != nil {
		return nil, nop, fmt.Errorf("$%s: %w", envDenyNetworks, err)
	}
	allow, err := dispatch.ParseHostAllow(c.getenv(envHostAllow))
	if err != nil {
		return nil, nop, fmt.Errorf("$%s: %w", envHostAllow, err)
	}
	served, done, err := c.serveLocalRepo(ctx, o)
	if err != nil {
		return nil, nop, err
	}
	allow = append(allow, served...)
	logger := zerolog.New(zerolog.ConsoleWriter{Out: c.stderr, NoColor: !c.interactive}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	// The bot's bounds: its default ceilings, deny list and host wall (the
	// CLI has no server configuration to raise them).
	db, err := docker.NewBounded(docker.Options{
		Image:      o.image,
		Isolation:  o.isolation,
		DataDir:    o.dataDir,
		ExtraHosts: []string{sandboxHost + ":host-gateway"},
		Env:        env,
		Gateway:    gw,
		Logger:     logger,
	}, docker.Bounds{DenyNets: deny, HostWall: true, HostAllow: allow})
	if err != nil {
		done()
		return nil, nop, err
	}
	results := filepath.Join(o.dataDir, "results")
	o.outDir = func(id string) string {
		if p := filepath.Join(results, id); exists(p) {
			return p
		}
		return db.OutputDir(id)
	}
	o.afterRun = func(id string) {
		// The receipt and media stay; the container and the inner
		// daemon's files (root's, possibly large) go.
		if err := os.MkdirAll(results, 0o755); err == nil {
			if err := os.Rename(db.OutputDir(id), filepath.Join(results, id)); err != nil {
				fmt.Fprintf(c.stderr, "sandbox-agent: keep the receipt of %s: %v\n", id, err)
				return
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := db.Cleanup(cctx, id); err != nil {
			fmt.Fprintf(c.stderr, "sandbox-agent: remove the sandbox of %s: %v\n", id, err)
		}
	}
	fmt.Fprintf(c.stderr, "sandbox-agent: docker sandbox %s, isolation %s\n", o.image, o.isolation)
	return &sandboxes{Backend: db, isolation: o.isolation, fallback: !o.isolationChosen, stderr: c.stderr}, done, nil
}

// sandboxEnv is what every sandbox of the run gets: the operator's
// opencode.json (and the variables it names), the project's secrets; the
// provider keys go to the model gateway's configuration instead.
func (c *cli) sandboxEnv(o *options) (map[string]string, *dispatch.GatewayConfig, error) {
	env := map[string]string{}
	if p := c.getenv(envOpenCode); p != "" {
		doc, refs, err := openCodeConfig(p)
		if err != nil {
			return nil, nil, err
		}
		env[dispatch.EnvOpenCodeConfigJSON] = doc
		// Keys the configuration reads as {env:VAR} go along when set.
		for _, n := range refs {
			if c.getenv(n) != "" && n != envTokenVar {
				o.passEnv = appendNew(o.passEnv, n)
			}
		}
	}
	// Provider keys go to the sandbox's model gateway only; the rest of
	// --pass-env stays the project's secrets, in the environment.
	gw, projectEnv, err := dispatch.ResolveProviders(o.passEnv, o.providers, c.lookupEnv)
	if err != nil {
		return nil, nil, fmt.Errorf("--provider: %w", err)
	}
	for _, n := range projectEnv {
		v, _ := c.lookupEnv(n)
		if strings.ContainsAny(v, "\r\n") {
			return nil, nil, fmt.Errorf("--pass-env %s: the value holds a newline, which an env file cannot carry", n)
		}
		env[n] = v
	}
	return env, gw, nil
}

// sandboxes is the docker backend with advice on a failed start. When
// nobody chose the isolation profile and the host refuses privileged
// containers, it falls back to caps once and says so, so the quick start
// works on such hosts too. It holds the backend as a dispatch.Backend,
// all the CLI asks of it (it looks for no optional interface), rather
// than the whole of *docker.Backend.
type sandboxes struct {
	dispatch.Backend
	isolation dispatch.Isolation
	fallback  bool
	stderr    io.Writer
}

func (s *sandboxes) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	spec.Isolation = s.isolation
	created, err := s.Backend.Submit(ctx, spec)
	if err != nil && s.fallback && s.isolation == dispatch.IsolationPrivileged && strings.Contains(err.Error(), "unable to apply caps") {
		fmt.Fprintf(s.stderr, "sandbox-agent: this host refuses privileged containers; using --isolation caps (set it, or %s=caps, to skip this try)\n", envIsolation)
		if cerr := s.Backend.Cleanup(ctx, spec.Order.TaskID); cerr != nil {
			return false, fmt.Errorf("%w (and removing the failed sandbox: %v)", err, cerr)
		}
		s.isolation, spec.Isolation = dispatch.IsolationCaps, dispatch.IsolationCaps
		created, err = s.Backend.Submit(ctx, spec)
	}
	return created, isolationHint(err, s.isolation)
}

// isolationHint points at the caps profile when a privileged sandbox
// does not start: some hosts refuse privileged containers ("unable to
// apply caps"); and at registering gVisor's runtime when a gvisor one
// does not because the engine has none.
func isolationHint(err error, isolation dispatch.Isolation) error {
	switch {
	case err == nil:
		return nil
	case isolation == dispatch.IsolationPrivileged:
		return fmt.Errorf("%w\nIf this host refuses privileged containers (\"unable to apply caps\"), run with --isolation caps (or %s=caps)", err, envIsolation)
	case isolation == dispatch.IsolationGVisor && errors.Is(err, dispatch.ErrIsolationRefused):
		return fmt.Errorf("%w\n--isolation gvisor runs the sandbox on gVisor's runtime %s, which this Docker engine lacks: "+
			"build runsc static (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@<version>) and register it in /etc/docker/daemon.json "+
			`with "runtimeArgs": ["--net-raw", "--host-uds=create"], then SIGHUP dockerd (see docs/operating.md, "Run the bot with the Docker backend")`, err, dispatch.GVisorRuntime)
	}
	return err
}

// openCodeConfig reads the operator's opencode.json for the sandboxes.
func openCodeConfig(path string) (string, []string, error) {
	doc, refs, err := dispatch.ReadOpenCodeConfig(path)
	if err != nil {
		return "", nil, fmt.Errorf("$%s: %w", envOpenCode, err)
	}
	return doc, refs, nil
}

// bridgeGateway is the default bridge's gateway address: the host as a
// container on that bridge reaches it.
func bridgeGateway(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", "bridge", "--format",
		`{{range .IPAM.Config}}{{.Gateway}} {{end}}|{{index .Options "com.docker.network.bridge.name"}}`).Output()
	if err != nil {
		return "", fmt.Errorf("find the docker bridge's gateway: docker network inspect bridge: %w", err)
	}
	gws, bridge, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
	for _, f := range strings.Fields(gws) {
		if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
			return f, nil
		}
	}
	// Engines that leave the gateway out of IPAM: the bridge interface's
	// own address is the gateway.
	if bridge == "" {
		bridge = "docker0"
	}
	ifc, err := net.InterfaceByName(bridge)
	if err != nil {
		return "", fmt.Errorf("find the docker bridge's gateway: no gateway in IPAM and no interface %s: %w", bridge, err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("find the docker bridge's gateway: interface %s has no IPv4 address", bridge)
}

func dockerImageExists(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput(); err != nil {
		return fmt.Errorf("docker image inspect %s: %s", ref, strings.TrimSpace(string(out)))
	}
	return nil
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func appendNew(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// serveLocalRepo serves a file:// repository to the sandbox over a
// one-time git server on the bridge gateway, and returns the host port
// the host wall must let the sandbox reach (that server's alone) and what
// stops it. Any other repository needs nothing of the host.
func (c *cli) serveLocalRepo(ctx context.Context, o *options) ([]dispatch.HostAllow, func(), error) {
	nop := func() {}
	dir, ok := strings.CutPrefix(o.repo, "file://")
	if !ok {
		return nil, nop, nil
	}
	gw, err := bridgeGateway(ctx)
	if err != nil {
		return nil, nop, fmt.Errorf("serve %s to the sandbox: %w", o.repoLabel, err)
	}
	if o.target != "" && !strings.HasPrefix("refs/heads/"+o.target, gitserve.AllowedRefPrefix) {
		return nil, nop, fmt.Errorf("--target-branch %s: a sandbox pushes only to agent/* branches of a local repository", o.target)
	}
	srv, err := gitserve.Start(gitserve.Options{Repo: dir, Listen: net.JoinHostPort(gw, "0"), Host: sandboxHost})
	if err != nil {
		return nil, nop, fmt.Errorf("serve %s to the sandbox: %w", o.repoLabel, err)
	}
	done := func() { _ = srv.Close() }
	u, err := url.Parse(srv.URL)
	port, perr := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || perr != nil {
		done()
		return nil, nop, fmt.Errorf("serve %s to the sandbox: the server's URL %q has no port", o.repoLabel, srv.URL)
	}
	o.repo, o.token = srv.URL, srv.Token
	fmt.Fprintf(c.stderr, "sandbox-agent: serving %s to the sandbox at %s (pushes land in it)\n", o.repoLabel, srv.URL)
	return []dispatch.HostAllow{{Name: dispatch.HostGatewayName, Port: uint16(port)}}, done, nil
}
