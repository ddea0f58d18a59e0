package dockerfilter

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// refusal is a request the filter will not forward. Its text is what the
// docker CLI prints after "Error response from daemon:".
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{msg: "sandbox docker filter: " + fmt.Sprintf(format, args...)}
}

// IsRefusal says whether err is a policy refusal (HTTP 403), as opposed to
// a malformed request (400) or a failure to ask the engine (502).
func IsRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

// Binder turns a bind source the agent asked for into one the engine may
// mount, or refuses it.
type Binder interface {
	// Stage checks that src lies inside the workspace, without a symlink
	// leading out of it, and returns the path to give the engine instead
	// (a mount the agent cannot swap). create makes a missing directory,
	// as the engine does for HostConfig.Binds.
	Stage(src string, create bool) (string, error)
	// Known says whether src, a mount source of an existing container, is
	// one Stage returned or the filter's own socket.
	Known(src string) bool
}

// Existing is what the filter reads of a container the engine already has.
type Existing struct {
	// ID is the engine's full id of the container.
	ID         string
	HostConfig object
	Mounts     []MountPoint
}

// MountPoint is one entry of a container's Mounts in `docker inspect`.
type MountPoint struct {
	Type   string
	Source string
}

// Inspector asks the engine about objects a request refers to.
type Inspector interface {
	// Container returns nil (and no error) when there is no such container.
	Container(ctx context.Context, id string) (*Existing, error)
	// NetworkDriver returns "" (and no error) when there is no such network.
	NetworkDriver(ctx context.Context, idOrName string) (string, error)
}

// Policy decides what the agent's Docker may do.
type Policy struct {
	Binds   Binder
	Inspect Inspector
	// Socket is the filter's own socket: binding it into a container gives
	// that container the same filtered Docker (testcontainers' reaper does).
	Socket string
	// Owned knows the containers created through the filter; only theirs
	// are namespaces another container may join.
	Owned Owner
	// IPv6 allows IPv6 networks (the init fenced IPv6 forwarding).
	IPv6 bool
}

// Owner says whether a container (by full id) was created through the
// filter.
type Owner interface {
	Owns(id string) bool
}

// checkExisting refuses to act on a container the agent could not have
// created through the filter: one with host-level settings or a bind
// outside what the filter staged (the init's own containers, or Supabase's
// log collector with the real socket mounted). exec, attach, start and
// copying into such a container would hand over what it holds.
//
// It returns the container it checked, so that the caller can forward the
// request with the container's full id instead of the reference it was
// given: the engine resolves a name (or an id prefix) again when it acts,
// and by then the agent may have renamed containers so that the same
// reference names another one. An unknown reference is a *noSuchContainer.
func (p *Policy) checkExisting(ctx context.Context, ref, action string) (*Existing, error) {
	c, err := p.Inspect.Container(ctx, ref)
	if err != nil {
		return nil, err
	}
	if c == nil || c.ID == "" {
		return nil, &noSuchContainer{ref: ref}
	}
	return c, p.checkSettings(c, ref, action)
}

// noSuchContainer is a reference to a container the engine does not have,
// answered as the engine answers it (404, "No such container: x").
type noSuchContainer struct{ ref string }

func (e *noSuchContainer) Error() string { return "No such container: " + e.ref }

// checkSettings is checkExisting's verdict on the container c.
func (p *Policy) checkSettings(c *Existing, id, action string) error {
	hc := c.HostConfig
	if hc == nil {
		hc = object{}
	}
	deny := func(why string) error {
		return refuse("%s container %s is refused: it %s, which the agent's Docker may not use", action, id, why)
	}
	if v, _, _ := hc.field("Privileged"); v == true {
		return deny("is privileged")
	}
	for _, ns := range []string{"PidMode", "IpcMode", "NetworkMode", "UTSMode", "UsernsMode"} {
		if s, _ := hc.str(ns); strings.EqualFold(s, "host") {
			return deny("uses the host's namespace (" + ns + "=host)")
		}
	}
	for _, k := range []string{"CapAdd", "Devices", "DeviceRequests", "DeviceCgroupRules"} {
		if v, _, _ := hc.field(k); !isZero(v) {
			return deny("has " + k)
		}
	}
	opts, _ := hc.strings("SecurityOpt")
	for _, o := range opts {
		if err := checkSecurityOpt(o); err != nil {
			return deny("has --security-opt " + o)
		}
	}
	for _, m := range c.Mounts {
		if src := filepath.Clean(m.Source); m.Type == "bind" && src != p.Socket && !p.Binds.Known(src) {
			return deny("mounts " + m.Source + " from outside the workspace")
		}
	}
	return nil
}

// checkSecurityOpt allows only settings that tighten confinement.
func checkSecurityOpt(o string) error {
	k, v, found := strings.Cut(o, "=")
	if !found {
		k, v, found = strings.Cut(o, ":")
	}
	if strings.EqualFold(k, "no-new-privileges") && (!found || v == "true" || v == "1") {
		return nil
	}
	switch strings.ToLower(k) {
	case "seccomp", "apparmor", "label", "systempaths":
		return refuse("HostConfig.SecurityOpt %q is refused: security options that loosen the container's confinement (seccomp, apparmor, label, systempaths) are host-level settings", o)
	}
	return refuse("HostConfig.SecurityOpt %q is refused: only no-new-privileges is allowed", o)
}
