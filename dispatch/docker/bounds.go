package docker

import (
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// Bounds are what every sandbox of a docker backend is held to, whoever
// starts it: the bot (app) and the local CLI (cmd/sandbox-agent) both
// build their backend with NewBounded, so a sandbox the CLI starts on a
// cloud VM is held as the bot's are.
type Bounds struct {
	// Limits bound each sandbox's memory, CPU and processes: a run that
	// asks for no resources gets the ceilings, one that asks for more gets
	// them too; a zero field takes sandboxcfg's default ceiling (8 GiB, 4
	// CPUs, 4096 processes).
	Limits sandboxcfg.Limits
	// DenyNets are networks no sandbox may reach, on top of link-local
	// (dispatch.DefaultDenyNets, which the sandbox's init always adds).
	DenyNets []dispatch.DenyNet
	// BotListen are the bot's listen addresses (none for the CLI).
	BotListen []string
	// HostWall denies every sandbox the machine the engine runs on: the
	// sandbox network's gateway, host.docker.internal and the host's
	// other addresses, every port, except HostAllow.
	HostWall bool
	// HostAllow are the host ports excepted from every deny: the
	// operator's SANDBOX_HOST_ALLOW, and what the caller opens for its
	// runs (the CLI's git server).
	HostAllow []dispatch.HostAllow
}

// NewBounded builds the backend of o held to b: o's own limits and deny
// list are replaced by b's.
func NewBounded(o Options, b Bounds) (*Backend, error) {
	l := b.Limits.WithDefaults()
	o.MemoryMB, o.CPU, o.PidsLimit = l.MaxMemoryMB, l.MaxCPU, l.PidsLimit
	o.DenyNets = append([]dispatch.DenyNet(nil), b.DenyNets...)
	o.BotListen = append([]string(nil), b.BotListen...)
	o.HostWall, o.HostAllow = b.HostWall, append([]dispatch.HostAllow(nil), b.HostAllow...)
	return New(o)
}
