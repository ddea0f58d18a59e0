package docker

// The sandboxes' network. On the engine's default bridge every container
// reaches every other: one run's agent (repository A) could connect to
// whatever another run's sandbox (repository B) listens on, its dev server,
// a published inner container, its gateway. The backend puts sandboxes on
// a bridge of its own with inter-container communication off instead: the
// engine drops traffic between two containers of that bridge in the host's
// FORWARD chain, outside every sandbox's network namespace, so it holds
// whatever a sandbox's root (or a task sandbox without a deny chain) does
// inside. The host, and through it the bot, the git remote and the
// operator's services on host addresses, stays reachable as before; the
// bot reaches previews and screencasts through sockets in the task
// directory, not over the network.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// DefaultNetwork is the bridge the backend creates, inter-container
// communication off, when Options.Network is empty.
const DefaultNetwork = "sandbox-bot"

// iccOption is the bridge driver's switch for traffic between its
// containers.
const iccOption = "com.docker.network.bridge.enable_icc"

// resolvConfFile is, in the data directory, the resolver configuration a
// container on the engine's default bridge gets, bound over every
// sandbox's /etc/resolv.conf (see ensureNetwork).
const resolvConfFile = "resolv.conf"

// sandboxNetwork is the sandboxes' network and the fence their init puts
// up: what ensureNetwork found, once per backend, and the deny list
// worked out at the first run.
type sandboxNetwork struct {
	*engine

	mu    sync.Mutex
	ready bool
	// resolvConf is the host path bound at /etc/resolv.conf; empty leaves
	// the engine's.
	resolvConf string

	denyOnce sync.Once
	deny     string // EnvDenyNets' value, worked out at the first run
}

// prepare makes sure of the network before a run starts on it, then
// works out the deny list, once: it fences the bot's port on the
// network's gateway, which exists from then on.
func (b *sandboxNetwork) prepare(ctx context.Context) error {
	if err := b.ensureNetwork(ctx); err != nil {
		return err
	}
	b.denyOnce.Do(func() { b.deny = dispatch.FormatDenyNets(b.denyNets(ctx)) })
	return nil
}

// network is the name of the sandboxes' network.
func (b *sandboxNetwork) network() string {
	if b.o.Network != "" {
		return b.o.Network
	}
	return DefaultNetwork
}

// ensureNetwork makes sure the sandboxes' network exists with
// inter-container communication off, creating it when it is missing (a
// second replica's creation racing this one's is fine), and refuses a
// network where sandboxes would reach each other. It runs until it
// succeeds once; the cost is a `docker network inspect` and, the first
// time on an engine, a create.
func (b *sandboxNetwork) ensureNetwork(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ready {
		return nil
	}
	name := b.network()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	format := `{{.Driver}} {{index .Options "` + iccOption + `"}} {{.EnableIPv6}}`
	out, err := b.cli.run(ctx, "network", "inspect", "--format", format, name)
	// Engines say "network X not found" (20.10) or "No such network".
	if msg := strings.ToLower(fmt.Sprint(err)); err != nil && (errors.Is(err, errNoSuch) || strings.Contains(msg, "no such network") || strings.Contains(msg, "not found")) {
		if _, cerr := b.cli.run(ctx, "network", "create", "--driver", "bridge",
			"--label", labelManaged+"=true", "--opt", iccOption+"=false", name); cerr != nil && !strings.Contains(cerr.Error(), "already exists") {
			return fmt.Errorf("create the sandboxes' network %q: %w", name, cerr)
		}
		b.log.Info().Str("network", name).Msg("created the sandboxes' network, inter-container communication off")
		out, err = b.cli.run(ctx, "network", "inspect", "--format", format, name)
	}
	if err != nil {
		return fmt.Errorf("the sandboxes' network %q: %w", name, err)
	}
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "bridge" || f[1] != "false" {
		return fmt.Errorf("the sandboxes' network %q has driver, %s and IPv6 %q: sandboxes on it could connect to each other; "+
			"use a bridge created with `docker network create --opt %s=false %s`, or leave the network unset for the bot's own (%s)",
			name, iccOption, strings.TrimSpace(out), iccOption, name, DefaultNetwork)
	}
	// The engine drops traffic between the bridge's containers with
	// iptables for IPv4 and ip6tables for IPv6, and ip6tables is off
	// unless the daemon is told (`"ip6tables": true`; experimental before
	// Engine 27), which a client cannot see: on an IPv6 bridge the
	// sandboxes would reach each other over IPv6 with icc off.
	if f[2] != "false" {
		return fmt.Errorf("the sandboxes' network %q has IPv6 on: the engine keeps its sandboxes apart on IPv6 only when its daemon runs ip6tables, "+
			"which the bot cannot check, so sandboxes on it might connect to each other; use an IPv4 bridge (`docker network create --opt %s=false NAME`), "+
			"or leave the network unset for the bot's own (%s)", name, iccOption, DefaultNetwork)
	}
	b.resolvConf = b.defaultResolvConf(ctx)
	b.ready = true
	return nil
}

// defaultResolvConf writes the resolv.conf a container on the engine's
// default bridge gets (the host's resolvers) into the data directory and
// returns its path. A user-defined network gives containers Docker's
// embedded resolver instead, 127.0.0.11: it answers the names of the other
// containers on the network (the neighbours' task ids), and an inner
// daemon, dropping a loopback resolver, would give the sandbox's own
// containers public resolvers (8.8.8.8) the host may not reach. One
// throwaway container per backend finds it; when that fails the engine's
// choice stays, with a warning.
func (b *sandboxNetwork) defaultResolvConf(ctx context.Context) string {
	conf, err := b.cli.run(ctx, "run", "--rm", "--network", "bridge", "--log-driver", "none", "--entrypoint", "cat", b.o.Image, "/etc/resolv.conf")
	if err == nil && !strings.Contains(conf, "nameserver") {
		err = fmt.Errorf("no nameserver in %q", conf)
	}
	p := filepath.Join(b.o.DataDir, resolvConfFile)
	if err == nil {
		err = writeFile(p, []byte(conf), 0o644) // atomic: a sandbox starting meanwhile binds a whole file
	}
	if err != nil {
		b.log.Warn().Err(err).Msg("the default bridge's resolvers are unknown: sandboxes get the engine's embedded resolver")
		return ""
	}
	return p
}

// networkArgs are the `docker run` flags that put a sandbox on its network.
func (b *sandboxNetwork) networkArgs() []string {
	args := []string{"--network", b.network()}
	if b.resolvConf != "" {
		args = append(args, "--mount", bind(b.resolvConf, "/etc/resolv.conf", true))
	}
	return args
}
