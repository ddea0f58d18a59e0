package dockerfilter

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// hostConfigFields are the HostConfig fields of Engine API 1.24 to 1.47
// (api/types/container/hostconfig.go, Resources included). A field not in
// this list is refused unless it is unset: a newer engine's setting the
// filter has not weighed could be a host-level one.
var hostConfigFields = []string{
	// Settings a project needs; nothing here reaches the host.
	"ContainerIDFile", "PortBindings", "RestartPolicy", "AutoRemove", "ConsoleSize",
	"CapDrop", "Dns", "DnsOptions", "DnsSearch", "ExtraHosts", "GroupAdd", "Links",
	"PublishAllPorts", "ReadonlyRootfs", "Tmpfs", "ShmSize", "Init",
	"CpuShares", "Memory", "NanoCpus", "CpuPeriod", "CpuQuota", "CpusetCpus", "CpusetMems",
	"KernelMemory", "KernelMemoryTCP", "MemoryReservation", "MemorySwap", "MemorySwappiness",
	"PidsLimit", "Ulimits", "CpuCount", "CpuPercent", "IOMaximumIOps", "IOMaximumBandwidth", "BlkioWeight",
	// Checked one by one below.
	"Binds", "Mounts", "VolumesFrom", "VolumeDriver", "LogConfig", "NetworkMode", "PidMode", "IpcMode",
	"UTSMode", "UsernsMode", "CgroupnsMode", "Cgroup", "Privileged", "CapAdd", "SecurityOpt", "Sysctls",
	"Runtime", "Isolation", "StorageOpt", "OomScoreAdj", "OomKillDisable", "CgroupParent",
	"Devices", "DeviceRequests", "DeviceCgroupRules", "MaskedPaths", "ReadonlyPaths", "Annotations",
	"BlkioWeightDevice", "BlkioDeviceReadBps", "BlkioDeviceWriteBps", "BlkioDeviceReadIOps", "BlkioDeviceWriteIOps",
	"CpuRealtimePeriod", "CpuRealtimeRuntime",
}

// mustBeUnset are the host-level settings refused whenever they hold
// anything, with why.
var mustBeUnset = map[string]string{
	"Privileged":           "privileged containers are root on the host",
	"CapAdd":               "added capabilities reach the host's kernel",
	"Sysctls":              "sysctls change kernel settings",
	"CgroupParent":         "a cgroup parent places the container outside the sandbox's cgroup",
	"Cgroup":               "joining another cgroup is a host-level setting",
	"Devices":              "devices give the container the host's hardware",
	"DeviceRequests":       "device requests give the container the host's hardware",
	"DeviceCgroupRules":    "device cgroup rules give the container the host's hardware",
	"MaskedPaths":          "overriding masked paths exposes the host's /proc and /sys",
	"ReadonlyPaths":        "overriding read-only paths exposes the host's /proc and /sys",
	"OomKillDisable":       "disabling the OOM killer lets a container take the host's memory",
	"Annotations":          "runtime annotations are host-level settings",
	"BlkioWeightDevice":    "block device settings name the host's devices",
	"BlkioDeviceReadBps":   "block device settings name the host's devices",
	"BlkioDeviceWriteBps":  "block device settings name the host's devices",
	"BlkioDeviceReadIOps":  "block device settings name the host's devices",
	"BlkioDeviceWriteIOps": "block device settings name the host's devices",
	"CpuRealtimePeriod":    "real-time scheduling is a host-level setting",
	"CpuRealtimeRuntime":   "real-time scheduling is a host-level setting",
}

// resourceFields are the fields of POST /containers/{id}/update.
var resourceFields = []string{
	"CpuShares", "Memory", "NanoCpus", "CpuPeriod", "CpuQuota", "CpusetCpus", "CpusetMems",
	"KernelMemory", "KernelMemoryTCP", "MemoryReservation", "MemorySwap", "MemorySwappiness",
	"PidsLimit", "Ulimits", "CpuCount", "CpuPercent", "IOMaximumIOps", "IOMaximumBandwidth", "BlkioWeight",
	"RestartPolicy",
	"CgroupParent", "Devices", "DeviceRequests", "DeviceCgroupRules", "OomKillDisable",
	"BlkioWeightDevice", "BlkioDeviceReadBps", "BlkioDeviceWriteBps", "BlkioDeviceReadIOps", "BlkioDeviceWriteIOps",
	"CpuRealtimePeriod", "CpuRealtimeRuntime",
}

// CreateContainer checks a POST /containers/create body and returns the
// body to forward: bind sources replaced by the filter's staged mounts.
func (p *Policy) CreateContainer(ctx context.Context, body []byte) ([]byte, error) {
	o, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	// The engine (20.10) still reads HostConfig fields written at the top
	// level of the body when there is no HostConfig object.
	for k, v := range o {
		if name := canonical(k, hostConfigFields); name != "" && !isZero(v) {
			return nil, refuse("%s at the top level of a create body is refused: host settings belong in HostConfig", k)
		}
	}
	hc, err := o.obj("HostConfig")
	if err != nil {
		return nil, err
	}
	if hc != nil {
		if err := p.checkHostConfig(ctx, hc); err != nil {
			return nil, err
		}
	}
	nc, err := o.obj("NetworkingConfig")
	if err != nil {
		return nil, err
	}
	if nc != nil {
		eps, err := nc.obj("EndpointsConfig")
		if err != nil {
			return nil, err
		}
		for name, ep := range eps {
			if err := p.checkNetworkName(ctx, "NetworkingConfig.EndpointsConfig", name); err != nil {
				return nil, err
			}
			if m, ok := ep.(map[string]any); ok {
				if id, _ := object(m).str("NetworkID"); id != "" {
					if err := p.checkNetworkName(ctx, "NetworkingConfig.EndpointsConfig.NetworkID", id); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return json.Marshal(o)
}

// checkHostConfig checks every field of hc and rewrites its bind sources.
func (p *Policy) checkHostConfig(ctx context.Context, hc object) error {
	for k, v := range hc {
		name := canonical(k, hostConfigFields)
		if name == "" {
			if isZero(v) {
				continue
			}
			return refuse("HostConfig.%s is refused: the filter does not know this setting, and an unknown one may reach the host", k)
		}
		if why, ok := mustBeUnset[name]; ok {
			// An empty MaskedPaths is not "unset": it unmasks everything
			// (what --security-opt systempaths=unconfined sends).
			if !isZero(v) || (v != nil && (name == "MaskedPaths" || name == "ReadonlyPaths")) {
				return refuse("HostConfig.%s is refused: %s", name, why)
			}
			continue
		}
		var err error
		switch name {
		case "Binds":
			err = p.checkBinds(hc, k)
		case "Mounts":
			err = p.checkMounts(hc, k)
		case "VolumesFrom":
			err = p.checkVolumesFrom(ctx, hc, k)
		case "VolumeDriver":
			err = checkVolumeDriver("HostConfig.VolumeDriver", v)
		case "LogConfig":
			err = checkLogConfig(v)
		case "NetworkMode", "PidMode", "IpcMode", "UTSMode":
			var pinned string
			if pinned, err = p.checkNamespace(ctx, name, v, name == "NetworkMode"); err == nil && pinned != "" {
				hc[k] = pinned
			}
		case "UsernsMode", "CgroupnsMode":
			if s, _ := v.(string); strings.EqualFold(s, "host") {
				err = refuse("HostConfig.%s=host is refused: the host's namespaces are the host's", name)
			}
		case "SecurityOpt":
			var opts []string
			if opts, err = hc.strings(k); err == nil {
				for _, o := range opts {
					if err = checkSecurityOpt(o); err != nil {
						break
					}
				}
			}
		case "Runtime":
			if s, _ := v.(string); s != "" && s != "runc" {
				err = refuse("HostConfig.Runtime %q is refused: only the default runtime (runc) is allowed", s)
			}
		case "Isolation":
			if s, _ := v.(string); s != "" && s != "default" {
				err = refuse("HostConfig.Isolation %q is refused", s)
			}
		case "StorageOpt":
			if m, ok := v.(map[string]any); ok {
				for sk := range m {
					if sk != "size" {
						err = refuse("HostConfig.StorageOpt %q is refused: only size is allowed", sk)
					}
				}
			}
		case "OomScoreAdj":
			if n, ok := v.(json.Number); ok && strings.HasPrefix(n.String(), "-") {
				err = refuse("HostConfig.OomScoreAdj %s is refused: a negative score makes the host's OOM killer spare the container", n)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkNamespace allows the container's own namespace, the namespace of
// another container the agent created through the filter (and that
// container's only when it passes checkExisting), and for networks a
// network by name unless its driver is the host's. A container the agent
// did not create is never joined: the init's services and the Supabase
// stack hold what the agent may not reach (a process of theirs can hold
// a socket or a file that /proc/<pid>/root shows to whoever shares its
// pid namespace).
//
// A join it allows comes back pinned, "container:<full id>", for the
// body: the engine keeps the mode as written and resolves a name when
// the container starts, so "container:x" checked now could name another
// container by then (the agent renames its own x away and something else
// to x). An id names one container for good.
func (p *Policy) checkNamespace(ctx context.Context, field string, v any, network bool) (string, error) {
	s, ok := v.(string)
	if !ok && v != nil {
		return "", fmt.Errorf("HostConfig.%s: want a string, got %s", field, jsonKind(v))
	}
	switch {
	case strings.EqualFold(s, "host"):
		return "", refuse("HostConfig.%s=host is refused: the host's namespaces are the host's", field)
	case len(s) >= len("container:") && strings.EqualFold(s[:len("container:")], "container:"):
		id, err := p.checkJoin(ctx, field, s, s[len("container:"):])
		if err != nil {
			return "", err
		}
		return "container:" + id, nil
	case network:
		return "", p.checkNetworkName(ctx, "HostConfig.NetworkMode", s)
	}
	return "", nil
}

// checkJoin decides HostConfig.<field>=container:<ref> and returns the
// full id of the container joined.
func (p *Policy) checkJoin(ctx context.Context, field, mode, ref string) (string, error) {
	c, err := p.Inspect.Container(ctx, ref)
	if err != nil {
		return "", err
	}
	if c == nil {
		return "", refuse("HostConfig.%s=%s is refused: there is no container %s", field, mode, ref)
	}
	if p.Owned == nil || c.ID == "" || !p.Owned.Owns(c.ID) {
		return "", refuse("HostConfig.%s=%s is refused: the agent did not create that container through this filter, so its namespaces are not the agent's to join", field, mode)
	}
	if c.HostConfig != nil {
		if m, _ := c.HostConfig.str(field); strings.EqualFold(m, "host") {
			return "", refuse("HostConfig.%s=%s is refused: that container uses the host's namespace", field, mode)
		}
	}
	// The container inspected above, not ref again: between two look-ups
	// the name could move.
	return c.ID, p.checkSettings(c, ref, "HostConfig."+field+": joining")
}

// checkNetworkName refuses the host network by name or by id.
func (p *Policy) checkNetworkName(ctx context.Context, field, name string) error {
	switch strings.ToLower(name) {
	case "", "default", "bridge", "none":
		return nil
	case "host":
		return refuse("%s=host is refused: the host network is the host's", field)
	}
	if strings.HasPrefix(name, "container:") {
		return nil
	}
	driver, err := p.Inspect.NetworkDriver(ctx, name)
	if err != nil {
		return err
	}
	if driver == "host" {
		return refuse("%s=%s is refused: that network is the host network", field, name)
	}
	return nil
}

// checkVolumesFrom refuses to copy the mounts of a container that has
// mounts the agent could not have made, and pins each entry to the full id
// of the container checked ("<id>[:mode]"): the engine looks the name up
// again when it creates the container.
func (p *Policy) checkVolumesFrom(ctx context.Context, hc object, key string) error {
	from, err := hc.strings(key)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(from))
	for _, f := range from {
		ref, mode, hasMode := strings.Cut(f, ":")
		c, err := p.checkExisting(ctx, ref, "HostConfig.VolumesFrom: taking the mounts of")
		if err != nil {
			return err
		}
		if hasMode {
			out = append(out, c.ID+":"+mode)
		} else {
			out = append(out, c.ID)
		}
	}
	hc[key] = out
	return nil
}

func checkLogConfig(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	t, _ := object(m).str("Type")
	switch t {
	case "", "json-file", "local", "none":
		return nil
	}
	return refuse("HostConfig.LogConfig.Type %q is refused: only json-file, local and none are allowed (other log drivers send logs out of the sandbox)", t)
}

// isHostPath says whether a bind source of HostConfig.Binds is a path
// (as opposed to a named volume), as the engine's Linux parser does.
func isHostPath(src string) bool { return filepath.IsAbs(src) }
