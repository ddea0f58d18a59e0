package nomadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DockerDriver runs a task with the local Docker engine the way Nomad's
// docker driver does, so a job built for Nomad runs for real in a test: the
// image and its entrypoint, privileged or cap_add/cap_drop/security_opt,
// the runtime (within allow_runtimes),
// relative volumes bound from the task directory, the alloc/, local/ and
// secrets/ directories at /alloc, /local and /secrets, the task env,
// labels, memory and CPU shares, stdout and stderr into the allocation's
// logs, and on stop SIGTERM then SIGKILL after the task's kill_timeout.
type DockerDriver struct {
	// Binary is the docker CLI; default "docker".
	Binary string
	// ExtraArgs go to `docker run` before the image, e.g.
	// "--add-host", "host.docker.internal:host-gateway".
	ExtraArgs []string
	// NodeAddr is what ${attr.unique.network.ip-address} becomes in the
	// task's environment, as a Nomad client interpolates its node's
	// attributes; default 127.0.0.1.
	NodeAddr string
	// HostVolumes are the node's host volumes by name (the client
	// configuration's host_volume blocks): a task's volume_mount of a
	// group's host volume binds the path. A job asking for a volume the
	// node lacks fails, as Nomad would never place it there.
	HostVolumes map[string]string
	// AllowRuntimes is the docker plugin's allow_runtimes: a task's
	// config.runtime must be one of them. Nomad's default is runc and
	// nvidia.
	AllowRuntimes []string
}

// Fingerprint is what Nomad's docker driver reports of the engine as node
// attributes: its runtimes (driver.docker.runtimes, sorted and
// comma-separated), from `docker info`, and privileged containers allowed.
func (d DockerDriver) Fingerprint() (map[string]string, error) {
	out, err := exec.Command(d.bin(), "info", "--format", "{{range $name, $_ := .Runtimes}}{{$name}} {{end}}").Output()
	if err != nil {
		return nil, fmt.Errorf("docker driver: fingerprint the engine: %w", err)
	}
	runtimes := strings.Fields(string(out))
	sort.Strings(runtimes)
	return map[string]string{"driver.docker.runtimes": strings.Join(runtimes, ",")}, nil
}

func (d DockerDriver) bin() string {
	if d.Binary == "" {
		return "docker"
	}
	return d.Binary
}

// runtimeArgs is --runtime for a task that names one the plugin allows.
func (d DockerDriver) runtimeArgs(cfg map[string]any) ([]string, error) {
	rt, _ := cfg["runtime"].(string)
	if rt == "" {
		return nil, nil
	}
	allowed := d.AllowRuntimes
	if allowed == nil {
		allowed = []string{"runc", "nvidia"}
	}
	if !slices.Contains(allowed, rt) {
		return nil, fmt.Errorf("docker driver: runtime %q is not allowed (the docker plugin's allow_runtimes: %v)", rt, allowed)
	}
	return []string{"--runtime", rt}, nil
}

var nodeAddrRef = regexp.MustCompile(`\$\{attr\.unique\.network\.ip-address\}`)

var nomadVarRef = regexp.MustCompile(`\$\{(NOMAD_[A-Za-z0-9_]+)\}`)

// Run implements Driver.
func (d DockerDriver) Run(ctx context.Context, t *Task) (int, error) {
	bin := d.bin()
	cfg := t.Task.Config
	image, _ := cfg["image"].(string)
	if image == "" {
		return 1, errors.New("docker driver: config.image is required")
	}
	interp := func(s string) string {
		return nomadVarRef.ReplaceAllStringFunc(s, func(m string) string { return t.Env[m[2:len(m)-1]] })
	}
	name := t.Task.Name + "-" + t.Alloc.ID
	args := []string{"run", "--name", name,
		"-v", t.AllocDir + ":/alloc",
		"-v", filepath.Join(t.TaskDir, "local") + ":/local",
		"-v", filepath.Join(t.TaskDir, "secrets") + ":/secrets",
	}
	for _, v := range stringList(cfg["volumes"]) {
		host, target, ok := strings.Cut(v, ":")
		if !ok {
			return 1, fmt.Errorf("docker driver: volume %q is not host:container", v)
		}
		if !filepath.IsAbs(host) {
			// Relative paths bind a directory of the task, as Nomad does.
			full, err := allocDirPath(t.TaskDir, host)
			if err != nil {
				return 1, err
			}
			if err := os.MkdirAll(full, 0o755); err != nil {
				return 1, err
			}
			host = full
		}
		args = append(args, "-v", host+":"+target)
	}
	mounts, err := d.hostVolumeArgs(t)
	if err != nil {
		return 1, err
	}
	args = append(args, mounts...)
	if u := t.Task.User; u != "" {
		args = append(args, "--user", u)
	}
	if b, _ := cfg["privileged"].(bool); b {
		args = append(args, "--privileged")
	}
	rt, err := d.runtimeArgs(cfg)
	if err != nil {
		return 1, err
	}
	args = append(args, rt...)
	for _, c := range stringList(cfg["cap_add"]) {
		args = append(args, "--cap-add", c)
	}
	for _, c := range stringList(cfg["cap_drop"]) {
		args = append(args, "--cap-drop", c)
	}
	for _, o := range stringList(cfg["security_opt"]) {
		args = append(args, "--security-opt", o)
	}
	switch n := cfg["pids_limit"].(type) {
	case float64: // the job arrived as JSON
		args = append(args, "--pids-limit", strconv.Itoa(int(n)))
	case int:
		args = append(args, "--pids-limit", strconv.Itoa(n))
	}
	for k, v := range labelMap(cfg["labels"]) {
		args = append(args, "--label", k+"="+interp(v))
	}
	if r := t.Task.Resources; r != nil {
		if r.MemoryMB != nil {
			args = append(args, "--memory", strconv.Itoa(*r.MemoryMB)+"m")
		}
		if r.CPU != nil {
			args = append(args, "--cpu-shares", strconv.Itoa(*r.CPU))
		}
	}
	// Values come from the job, which never holds a secret: the token is a
	// file under /secrets.
	nodeAddr := d.NodeAddr
	if nodeAddr == "" {
		nodeAddr = "127.0.0.1"
	}
	for _, kv := range SortedEnv(t.Env) {
		args = append(args, "-e", nodeAddrRef.ReplaceAllLiteralString(kv, nodeAddr))
	}
	args = append(args, d.ExtraArgs...)
	args = append(args, imageArgs(image, cfg)...)

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = t.Stdout, t.Stderr
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("docker driver: start: %w", err)
	}
	defer exec.Command(bin, "rm", "-f", name).Run()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return exitCode(err)
	case <-ctx.Done():
		grace := 5 * time.Second
		if t.Task.KillTimeout != nil {
			grace = *t.Task.KillTimeout
		}
		// docker stop sends SIGTERM to PID 1, waits, then SIGKILLs.
		stop := exec.Command(bin, "stop", "-t", strconv.Itoa(int(grace.Seconds())), name)
		if out, err := stop.CombinedOutput(); err != nil {
			fmt.Fprintf(t.Stderr, "docker stop %s: %v: %s\n", name, err, out)
		}
		return exitCode(<-exited)
	}
}

// imageArgs is the image and what it runs: entrypoint replaces the
// image's, as the docker driver's does.
func imageArgs(image string, cfg map[string]any) []string {
	var args []string
	ep := stringList(cfg["entrypoint"])
	if len(ep) > 0 {
		args = append(args, "--entrypoint", ep[0])
	}
	args = append(args, image)
	if len(ep) > 1 {
		args = append(args, ep[1:]...)
	}
	return append(args, stringList(cfg["args"])...)
}

func exitCode(err error) (int, error) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

func stringList(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// labelMap reads labels in the JSON jobspec's list-of-maps form, before or
// after a JSON round trip.
func labelMap(v any) map[string]string {
	out := map[string]string{}
	switch x := v.(type) {
	case []map[string]string:
		for _, m := range x {
			for k, v := range m {
				out[k] = v
			}
		}
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				for k, v := range m {
					if s, ok := v.(string); ok {
						out[k] = s
					}
				}
			}
		}
	}
	return out
}

// hostVolumeArgs binds the task's host volume mounts.
func (d DockerDriver) hostVolumeArgs(t *Task) ([]string, error) {
	var args []string
	for _, m := range t.Task.VolumeMounts {
		if m == nil || m.Volume == nil || m.Destination == nil || t.Group == nil {
			continue
		}
		req := t.Group.Volumes[*m.Volume]
		if req == nil || req.Type != "host" {
			return nil, fmt.Errorf("docker driver: volume_mount %q names no host volume of the group", *m.Volume)
		}
		path, ok := d.HostVolumes[req.Source]
		if !ok {
			return nil, fmt.Errorf("docker driver: this node has no host volume %q", req.Source)
		}
		v := path + ":" + *m.Destination
		if req.ReadOnly || (m.ReadOnly != nil && *m.ReadOnly) {
			v += ":ro"
		}
		args = append(args, "-v", v)
	}
	return args, nil
}
