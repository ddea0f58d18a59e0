package dockerfilter

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// checkBinds checks HostConfig.Binds ("src:dst[:opts]") and replaces each
// path source with its staged mount; named volumes pass.
func (p *Policy) checkBinds(hc object, key string) error {
	binds, err := hc.strings(key)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(binds))
	for _, b := range binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 || !isHostPath(parts[0]) {
			// An anonymous ("/dst") or named ("name:/dst") volume.
			out = append(out, b)
			continue
		}
		if len(parts) > 3 {
			return fmt.Errorf("HostConfig.Binds %q: want source:target[:options]", b)
		}
		if len(parts) == 3 {
			for _, opt := range strings.Split(parts[2], ",") {
				if err := checkPropagation("HostConfig.Binds "+b, opt); err != nil {
					return err
				}
			}
		}
		staged, err := p.stage("HostConfig.Binds", parts[0], true)
		if err != nil {
			return err
		}
		parts[0] = staged
		out = append(out, strings.Join(parts, ":"))
	}
	hc[key] = out
	return nil
}

// stage lets the filter's own socket through as it is and stages every
// other source.
func (p *Policy) stage(field, src string, create bool) (string, error) {
	if p.Socket != "" && filepath.Clean(src) == p.Socket {
		return p.Socket, nil
	}
	return p.Binds.Stage(src, create)
}

// checkPropagation refuses shared propagation: mounts made inside the
// container would appear in the sandbox.
func checkPropagation(where, opt string) error {
	switch opt {
	case "shared", "rshared":
		return refuse("%s: %s propagation is refused: mounts made in the container would propagate to the sandbox", where, opt)
	}
	return nil
}

var mountFields = []string{"Type", "Source", "Target", "ReadOnly", "Consistency", "BindOptions", "VolumeOptions", "TmpfsOptions"}

// checkMounts checks HostConfig.Mounts: binds are staged like Binds (but
// never created: the engine does not create them either), volumes must use
// the local driver without host paths, tmpfs passes.
func (p *Policy) checkMounts(hc object, key string) error {
	mounts, err := hc.list(key)
	if err != nil {
		return err
	}
	for i, raw := range mounts {
		m, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("HostConfig.Mounts[%d]: want an object, got %s", i, jsonKind(raw))
		}
		mo := object(m)
		for k, v := range mo {
			if canonical(k, mountFields) == "" && !isZero(v) {
				return refuse("HostConfig.Mounts[%d].%s is refused: the filter does not know this setting", i, k)
			}
		}
		typ, err := mo.str("Type")
		if err != nil {
			return err
		}
		where := fmt.Sprintf("HostConfig.Mounts[%d]", i)
		switch typ {
		case "bind":
			bo, err := mo.obj("BindOptions")
			if err != nil {
				return err
			}
			if bo != nil {
				prop, _ := bo.str("Propagation")
				if err := checkPropagation(where, prop); err != nil {
					return err
				}
			}
			src, err := mo.str("Source")
			if err != nil {
				return err
			}
			staged, err := p.stage(where, src, false)
			if err != nil {
				return err
			}
			_, sk, _ := mo.field("Source")
			mo[sk] = staged
		case "volume":
			vo, err := mo.obj("VolumeOptions")
			if err != nil {
				return err
			}
			if vo != nil {
				dc, err := vo.obj("DriverConfig")
				if err != nil {
					return err
				}
				if dc != nil {
					name, _ := dc.str("Name")
					if err := checkVolumeDriver(where+".VolumeOptions.DriverConfig.Name", name); err != nil {
						return err
					}
					opts, err := dc.obj("Options")
					if err != nil {
						return err
					}
					if err := checkLocalVolumeOptions(where+".VolumeOptions.DriverConfig.Options", opts); err != nil {
						return err
					}
				}
			}
		case "tmpfs":
		default:
			return refuse("%s.Type %q is refused: only bind (inside the workspace), volume and tmpfs mounts are allowed", where, typ)
		}
	}
	return nil
}

func checkVolumeDriver(field string, v any) error {
	s, _ := v.(string)
	if s == "" || s == "local" {
		return nil
	}
	return refuse("%s %q is refused: only the local volume driver is allowed (volume plugins are host-level)", field, s)
}

// tmpfsOptions are the mount options a local tmpfs volume may carry.
var tmpfsOptions = []string{"size", "mode", "uid", "gid", "nr_inodes", "noexec", "nosuid", "nodev", "ro", "rw"}

// checkLocalVolumeOptions refuses the local driver's host mounts: type=none
// with o=bind (a host path), a device, or a filesystem other than tmpfs
// (a host block device, NFS). Plain volumes have no options.
func checkLocalVolumeOptions(field string, opts object) error {
	// type first: it says what the rest means.
	keys := []string{"type"}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, ok := opts[k]; !ok {
			continue
		}
		s, _ := opts[k].(string)
		switch k {
		case "type":
			if s != "tmpfs" {
				return refuse("%s type=%s is refused: a local volume may only be a plain volume or tmpfs (type=none with o=bind mounts a host path)", field, s)
			}
		case "device":
			if s != "tmpfs" && s != "" {
				return refuse("%s device=%s is refused: local volumes may not mount host paths or devices", field, s)
			}
		case "o":
			for _, o := range strings.Split(s, ",") {
				name, _, _ := strings.Cut(o, "=")
				if o == "" {
					continue
				}
				if canonical(name, tmpfsOptions) == "" || name == "bind" || name == "rbind" {
					return refuse("%s o=%s is refused: mount option %q is not allowed (o=bind mounts a host path)", field, s, o)
				}
			}
		default:
			return refuse("%s %s=%s is refused: the local driver takes only type, o and device", field, k, s)
		}
	}
	if len(opts) > 0 {
		if t, ok := opts["type"]; !ok || t != "tmpfs" {
			return refuse("%s is refused: local volume options need type=tmpfs", field)
		}
	}
	return nil
}
