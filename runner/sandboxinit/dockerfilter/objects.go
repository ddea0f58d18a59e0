package dockerfilter

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
)

// decodeWithDriver decodes a volume or network create body and returns
// its Driver.
func decodeWithDriver(body []byte) (object, string, error) {
	o, err := decodeBody(body)
	if err != nil {
		return nil, "", err
	}
	driver, err := o.str("Driver")
	return o, driver, err
}

// CreateVolume checks POST /volumes/create.
func (p *Policy) CreateVolume(body []byte) ([]byte, error) {
	o, driver, err := decodeWithDriver(body)
	if err != nil {
		return nil, err
	}
	if err := checkVolumeDriver("Driver", driver); err != nil {
		return nil, err
	}
	if v, k, _ := o.field("ClusterVolumeSpec"); !isZero(v) {
		return nil, refuse("%s is refused: cluster volumes belong to swarm", k)
	}
	opts, err := o.obj("DriverOpts")
	if err != nil {
		return nil, err
	}
	if err := checkLocalVolumeOptions("DriverOpts", opts); err != nil {
		return nil, err
	}
	return json.Marshal(o)
}

// bridgeOptions are the driver options a bridge network may set. The
// bridge's name is not among them: naming an existing interface would
// attach the network to it.
var bridgeOptions = []string{
	"com.docker.network.bridge.enable_icc",
	"com.docker.network.bridge.enable_ip_masquerade",
	"com.docker.network.bridge.host_binding_ipv4",
	"com.docker.network.driver.mtu",
	"com.docker.network.container_iface_prefix",
}

// CreateNetwork checks POST /networks/create: bridge networks only
// (macvlan and ipvlan sit on the sandbox's own interface, past any fence
// on its bridge), no swarm scope.
func (p *Policy) CreateNetwork(body []byte) ([]byte, error) {
	o, driver, err := decodeWithDriver(body)
	if err != nil {
		return nil, err
	}
	if driver != "" && driver != "bridge" {
		return nil, refuse("network Driver %q is refused: only bridge networks are allowed", driver)
	}
	for _, k := range []string{"Ingress", "ConfigOnly", "ConfigFrom"} {
		if v, key, _ := o.field(k); !isZero(v) {
			return nil, refuse("network %s is refused: swarm and config-only networks are not allowed", key)
		}
	}
	if scope, _ := o.str("Scope"); scope != "" && scope != "local" {
		return nil, refuse("network Scope %q is refused: only local networks are allowed", scope)
	}
	ipam, err := o.obj("IPAM")
	if err != nil {
		return nil, err
	}
	if ipam != nil {
		if d, _ := ipam.str("Driver"); d != "" && d != "default" {
			return nil, refuse("network IPAM.Driver %q is refused: only the default IPAM driver is allowed", d)
		}
	}
	if err := p.checkIPv6(o, ipam); err != nil {
		return nil, err
	}
	opts, err := o.obj("Options")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		if canonical(k, bridgeOptions) == "" {
			return nil, refuse("network option %q is refused: allowed options are %s", k, strings.Join(bridgeOptions, ", "))
		}
	}
	return json.Marshal(o)
}

// checkIPv6 refuses an IPv6 network unless the init fenced IPv6: its
// containers' packets are forwarded by the sandbox's IPv6 stack, which the
// IPv4 rules do not see.
func (p *Policy) checkIPv6(o, ipam object) error {
	if p.IPv6 {
		return nil
	}
	const why = "this sandbox fences IPv4 only (it had no IPv6 when it started), so an IPv6 network's containers would route around its egress rules; use an IPv4 network"
	if v, k, _ := o.field("EnableIPv6"); v == true {
		return refuse("network %s is refused: %s", k, why)
	}
	if ipam == nil {
		return nil
	}
	v, _, _ := ipam.field("Config")
	pools, _ := v.([]any)
	for _, pool := range pools {
		m, ok := pool.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range []string{"Subnet", "IPRange", "Gateway"} {
			if s, _ := object(m).str(k); strings.Contains(s, ":") {
				return refuse("network IPAM.Config %s %q is refused: %s", k, s, why)
			}
		}
	}
	return nil
}

// ConnectNetwork checks POST /networks/{id}/connect and, with connect
// false, /disconnect: the container must be one the agent created (a
// service's networks are the init's to choose), and its reference is
// pinned to the full id the filter checked.
func (p *Policy) ConnectNetwork(ctx context.Context, network string, connect bool, body []byte) ([]byte, error) {
	o, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	if connect {
		if err := p.checkNetworkName(ctx, "network", network); err != nil {
			return nil, err
		}
	}
	ref, err := o.str("Container")
	if err != nil {
		return nil, err
	}
	c, err := p.agentsOwn(ctx, ref, "connecting or disconnecting", "so its networks are not the agent's to change")
	if err != nil {
		return nil, err
	}
	_, k, _ := o.field("Container")
	o[k] = c.ID
	return json.Marshal(o)
}

var execFields = []string{"AttachStdin", "AttachStdout", "AttachStderr", "ConsoleSize", "DetachKeys",
	"Tty", "Env", "Cmd", "Privileged", "User", "WorkingDir"}

// CreateExec checks POST /containers/{id}/exec and returns the container
// the exec will run in (its full id is what the request is forwarded to).
func (p *Policy) CreateExec(ctx context.Context, container string, body []byte) (*Existing, []byte, error) {
	o, err := decodeBody(body)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range o {
		name := canonical(k, execFields)
		switch {
		case name == "Privileged" && !isZero(v):
			return nil, nil, refuse("exec Privileged is refused: a privileged exec is root on the host")
		case name == "" && !isZero(v):
			return nil, nil, refuse("exec %s is refused: the filter does not know this setting", k)
		}
	}
	c, err := p.checkExisting(ctx, container, "exec in")
	if err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(o)
	return c, out, err
}

// UpdateContainer checks POST /containers/{id}/update.
func (p *Policy) UpdateContainer(body []byte) ([]byte, error) {
	o, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	for k, v := range o {
		name := canonical(k, resourceFields)
		if name == "" {
			if isZero(v) {
				continue
			}
			return nil, refuse("update %s is refused: the filter does not know this setting", k)
		}
		if why, ok := mustBeUnset[name]; ok && !isZero(v) {
			return nil, refuse("update %s is refused: %s", name, why)
		}
	}
	return json.Marshal(o)
}

// buildQuery are the query parameters of POST /build that the filter
// weighs; the rest (tags, build args, labels, cache settings, limits of
// the build's own containers) are a project's business.
func checkBuildQuery(q url.Values) error {
	for k, vs := range q {
		for _, v := range vs {
			switch strings.ToLower(k) {
			case "networkmode":
				if strings.EqualFold(v, "host") || strings.HasPrefix(v, "container:") {
					return refuse("docker build --network=%s is refused: builds may use their own network only", v)
				}
			case "cgroupparent":
				if v != "" {
					return refuse("docker build --cgroup-parent is refused: a cgroup parent places the build outside the sandbox's cgroup")
				}
			case "isolation":
				if v != "" && v != "default" {
					return refuse("docker build --isolation=%s is refused", v)
				}
			case "remote":
				// BuildKit's own context comes through the session.
				if v != "" && v != "client-session" {
					return refuse("docker build from a remote context (%s) is refused: the daemon would fetch it as root, past the agent's egress fence; clone or download it first", v)
				}
			case "securityopt", "entitlements", "allow":
				if v != "" && v != "[]" {
					return refuse("docker build %s=%s is refused: builds get no extra privileges (network.host, security.insecure)", k, v)
				}
			}
		}
	}
	return nil
}
