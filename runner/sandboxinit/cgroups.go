package sandboxinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	Root       string
	MountPoint string
	Options    []string // per-mount options (ro, nosuid, ...)
	FSType     string
	Source     string
}

func (m mount) readOnly() bool { return hasOpt(m.Options, "ro") }

func hasOpt(opts []string, o string) bool {
	for _, x := range opts {
		if x == o {
			return true
		}
	}
	return false
}

// parseMountinfo reads the format described in proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			return nil, fmt.Errorf("mountinfo line %d is malformed: %q", n, sc.Text())
		}
		out = append(out, mount{
			Root:       unescapeMount(fields[3]),
			MountPoint: unescapeMount(fields[4]),
			Options:    strings.Split(fields[5], ","),
			FSType:     fields[sep+1],
			Source:     fields[sep+2],
		})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func readMounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// cgroupRoot is where the container runtime mounts the cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// remountFlags keeps the flags of a mount that a bind remount would
// otherwise clear.
func remountFlags(opts []string) uintptr {
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND)
	for _, o := range opts {
		switch o {
		case "nosuid":
			flags |= syscall.MS_NOSUID
		case "nodev":
			flags |= syscall.MS_NODEV
		case "noexec":
			flags |= syscall.MS_NOEXEC
		case "noatime":
			flags |= syscall.MS_NOATIME
		case "nodiratime":
			flags |= syscall.MS_NODIRATIME
		case "relatime":
			flags |= syscall.MS_RELATIME
		case "strictatime":
			flags |= syscall.MS_STRICTATIME
		}
	}
	return flags
}

// prepareCgroups makes the cgroup hierarchies writable for the inner daemon.
// Docker mounts them read-only in any container that is not --privileged
// (the caps profile). A plain "remount,rw" would try to change the shared
// superblock and fail with EBUSY, so each mount point is remounted as a bind
// with only its own read-only flag dropped.
//
// On a cgroup v2 host the init also moves every process of the container
// into a child group, because the kernel refuses to delegate controllers to
// children of a group that still holds processes (the same dance as moby's
// hack/dind script).
func prepareCgroups(log zerolog.Logger) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if m.MountPoint != cgroupRoot && !strings.HasPrefix(m.MountPoint, cgroupRoot+"/") {
			continue
		}
		if !m.readOnly() {
			continue
		}
		if err := syscall.Mount("", m.MountPoint, "", remountFlags(m.Options), ""); err != nil {
			errs = append(errs, fmt.Errorf("remount %s read-write: %w (the caps profile needs CAP_SYS_ADMIN and AppArmor unconfined)", m.MountPoint, err))
			continue
		}
		log.Debug().Str("mount", m.MountPoint).Msg("cgroup hierarchy remounted read-write")
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return nestCgroupV2(log)
	}
	return nil
}

func nestCgroupV2(log zerolog.Logger) error {
	initGroup := filepath.Join(cgroupRoot, "init")
	if err := os.MkdirAll(initGroup, 0o755); err != nil {
		return fmt.Errorf("cgroup v2: create %s: %w", initGroup, err)
	}
	procs, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	for _, pid := range strings.Fields(string(procs)) {
		// A process may exit between the read and the move; that is fine.
		if err := os.WriteFile(filepath.Join(initGroup, "cgroup.procs"), []byte(pid), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroup v2: move pid %s to %s: %w", pid, initGroup, err)
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	var enable []string
	for _, c := range strings.Fields(string(ctrl)) {
		enable = append(enable, "+"+c)
	}
	if len(enable) > 0 {
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
			return fmt.Errorf("cgroup v2: enable controllers %v: %w", enable, err)
		}
	}
	log.Debug().Strs("controllers", enable).Msg("cgroup v2 delegated to the inner daemon")
	return nil
}
