package app

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
)

// NewBackend builds the configured backend. There is no fallback: with the
// docker backend (the default without NOMAD_ADDR) and no engine answering,
// the bot still runs on docker, reports itself not ready, and every run
// that cannot start is reported on its issue. Agents run as plain child
// processes only when SANDBOX_BACKEND=process says so. The returned func
// releases the backend's resources.
func NewBackend(ctx context.Context, cfg *Config, logger zerolog.Logger) (dispatch.Backend, func(), error) {
	nop := func() {}
	gw, projectEnv, err := dispatch.ResolveProviders(cfg.PassEnv, cfg.Providers, os.LookupEnv)
	if err != nil {
		return nil, nop, err
	}
	env := passEnv(projectEnv)
	if cfg.OpenCodeConfig != "" {
		doc, _, err := dispatch.ReadOpenCodeConfig(cfg.OpenCodeConfig)
		if err != nil {
			return nil, nop, fmt.Errorf("OPENCODE_CONFIG: %w", err)
		}
		env[dispatch.EnvOpenCodeConfigJSON] = doc
	}
	// Validated at load: no sandbox reaches its host but these ports.
	hostAllow, err := cfg.hostAllow()
	if err != nil {
		return nil, nop, err
	}
	switch cfg.Backend {
	case "nomad":
		nc := api.DefaultConfig()
		nc.Address = cfg.Nomad.Addr
		if cfg.Nomad.Token != "" {
			nc.SecretID = cfg.Nomad.Token
		}
		if cfg.Nomad.Namespace != "" {
			nc.Namespace = cfg.Nomad.Namespace
		}
		if cfg.Nomad.Region != "" {
			nc.Region = cfg.Nomad.Region
		}
		b, err := nomad.New(nomad.Options{
			Config: nc, Image: cfg.Image, Isolation: cfg.Isolation, Region: cfg.Nomad.Region, Namespace: cfg.Nomad.SandboxNamespace,
			Datacenters: cfg.Nomad.Datacenters, NodePool: cfg.Nomad.NodePool, KillTimeout: cfg.Nomad.KillTimeout, Purge: cfg.Nomad.Purge,
			Limits: nomad.Limits{MaxCPU: cfg.Limits.MaxCPU, MaxMemoryMB: cfg.Limits.MaxMemoryMB}, PidsLimit: cfg.Limits.PidsLimit, Env: env, Gateway: gw, Logger: logger,
			DenyNets: nomadDenyNets(ctx, cfg, logger), HostWall: true, HostAllow: hostAllow,
			SetupCache: nomad.SetupCache{Volume: cfg.SetupCache.NomadVolume,
				MaxBytes: max(cfg.SetupCache.RepoBytes(), 0), NodeMaxBytes: max(cfg.SetupCache.NodeBytes(), 0)},
			OSVVolume: cfg.NomadOSVVolume,
		})
		if err != nil {
			return nil, nop, err
		}
		return b, func() { _ = b.Close() }, nil
	case "docker":
		if err := docker.Available(ctx); err != nil {
			logger.Error().Err(err).Msg("no Docker engine reachable: not ready, runs fail and are reported on their issues until it answers " +
				"(the bot never falls back to unisolated processes; SANDBOX_BACKEND=process does that on purpose)")
		}
		b, err := docker.NewBounded(docker.Options{
			Image: cfg.Image, Isolation: cfg.Isolation, DataDir: cfg.DataDir, CacheDir: filepath.Join(cfg.DataDir, "cache"),
			ExtraHosts: []string{"host.docker.internal:host-gateway"}, Env: env, Gateway: gw, Logger: logger,
			CacheScope:         cfg.CacheScope,
			SetupCacheMaxBytes: cfg.SetupCache.RepoBytes(), SetupCacheNodeMaxBytes: max(cfg.SetupCache.NodeBytes(), 0),
			OSVDir: cfg.OSVDir,
		}, docker.Bounds{Limits: cfg.Limits, DenyNets: cfg.denyNets(), BotListen: botListeners(cfg), HostWall: true, HostAllow: hostAllow})
		if err != nil {
			return nil, nop, err
		}
		return b, nop, nil
	default:
		return newProcess(cfg, logger)
	}
}

// passEnv picks the named variables from the bot's own environment.
func passEnv(names []string) map[string]string {
	env := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env[n] = v
		}
	}
	return env
}

func newProcess(cfg *Config, logger zerolog.Logger) (dispatch.Backend, func(), error) {
	runner, err := findRunner(cfg.RunnerBinary)
	if err != nil {
		return nil, func() {}, err
	}
	fmt.Fprintln(os.Stderr, "\n"+
		"**********************************************************************\n"+
		"*  WARNING: no sandbox. Runs are plain child processes of this bot,  *\n"+
		"*  with this machine's files, network and credentials in reach.     *\n"+
		"*  Use it to try the bot, never for repositories you do not trust.   *\n"+
		"*  SANDBOX_BACKEND=process chose this; unset it for Docker sandboxes.*\n"+
		"**********************************************************************")
	// The runner and the agent see only an allowlisted environment: never
	// the App's key, the webhook secret or NOMAD_TOKEN.
	b, err := process.New(process.Options{Runner: runner, DataDir: cfg.DataDir, Logger: logger,
		Env: process.MinimalEnv(os.Environ(), cfg.PassEnv)})
	if err != nil {
		return nil, func() {}, err
	}
	return b, func() {}, nil
}

// findRunner locates sandbox-runner: the configured path, next to this
// executable (go build -o bin/ ./cmd/...), or on PATH.
func findRunner(configured string) (string, error) {
	if configured != "" {
		p, err := exec.LookPath(configured)
		if err != nil {
			return "", fmt.Errorf("SANDBOX_RUNNER_BINARY: %w", err)
		}
		return p, nil
	}
	if p, ok := process.FindRunner(); ok {
		return p, nil
	}
	return "", fmt.Errorf("SANDBOX_RUNNER_BINARY: no sandbox-runner next to this binary or on PATH (build both: go build -o bin/ ./cmd/...)")
}

// botListeners are the bot's own addresses that no sandbox may reach: the
// webhook listener and, when it is on, the admin listener (dashboard,
// metrics).
func botListeners(cfg *Config) []string {
	l := []string{cfg.Listen}
	if cfg.Ops.AdminListen != "" && cfg.Ops.AdminListen != "off" {
		l = append(l, cfg.Ops.AdminListen)
	}
	if e := engineListener(os.Getenv("DOCKER_HOST")); e != "" {
		l = append(l, e)
	}
	return l
}

// engineListener is the Docker engine's API port when the bot reaches the
// engine over TCP (DOCKER_HOST=tcp://host:port): a sandbox that reached it
// would be root on the host, so sandboxes are fenced off that port on
// every address of the host and the sandbox network's gateway, whichever
// address the bot itself names (an engine told to listen on 127.0.0.1
// may listen on more).
func engineListener(dockerHost string) string {
	u, err := url.Parse(dockerHost)
	if err != nil || u.Scheme != "tcp" || u.Port() == "" {
		return ""
	}
	return ":" + u.Port()
}
