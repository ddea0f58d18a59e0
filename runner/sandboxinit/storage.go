package sandboxinit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Storage drivers in the order the init tries them: overlay2 is the fast
// one; fuse-overlayfs works where the kernel refuses overlay on the backing
// filesystem (overlay on overlay, when /var/lib/docker is not a bind) but
// needs /dev/fuse; vfs always works and copies every layer in full.
const (
	driverOverlay2 = "overlay2"
	driverFuse     = "fuse-overlayfs"
	driverVFS      = "vfs"
)

// storageChoice is the driver picked and why, so a slow sandbox on vfs can
// be traced to its cause from the log.
type storageChoice struct {
	Driver  string
	Reasons []string
	Backing string // filesystem type under /var/lib/docker
}

func (c storageChoice) String() string {
	return fmt.Sprintf("%s (%s)", c.Driver, strings.Join(c.Reasons, "; "))
}

// storageProber tries a driver's kind of mount in a scratch directory.
type storageProber interface {
	Overlay(dir string) error
	FuseOverlay(dir string) error
}

// chooseStorage applies the order overlay2, fuse-overlayfs, vfs, unless the
// operator forced a driver.
func chooseStorage(forced, root string, p storageProber) storageChoice {
	c := storageChoice{Backing: fsType(root)}
	if forced != "" {
		c.Driver = forced
		c.Reasons = append(c.Reasons, "forced by "+envStorageDriver)
		return c
	}
	if err := p.Overlay(root); err != nil {
		c.Reasons = append(c.Reasons, fmt.Sprintf("overlay2 rejected: overlay mount on %s in %s failed: %v", c.Backing, root, err))
	} else {
		c.Driver = driverOverlay2
		c.Reasons = append(c.Reasons, fmt.Sprintf("overlay2: overlay mount on %s in %s works", c.Backing, root))
		return c
	}
	if err := p.FuseOverlay(root); err != nil {
		c.Reasons = append(c.Reasons, "fuse-overlayfs rejected: "+err.Error())
	} else {
		c.Driver = driverFuse
		c.Reasons = append(c.Reasons, "fuse-overlayfs: mount works")
		return c
	}
	c.Driver = driverVFS
	c.Reasons = append(c.Reasons, "vfs: always works, but every layer is a full copy (slow, large); bind /var/lib/docker to a host directory to get overlay2")
	return c
}

// mountProber does real trial mounts.
type mountProber struct{}

// probeDirs creates lower/upper/work/merged with a marker file in lower.
func probeDirs(root string) (base string, err error) {
	base, err = os.MkdirTemp(root, ".storage-probe-")
	if err != nil {
		return "", fmt.Errorf("create probe directory in %s: %w", root, err)
	}
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o700); err != nil {
			os.RemoveAll(base)
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(base, "lower", "marker"), []byte("x"), 0o600); err != nil {
		os.RemoveAll(base)
		return "", err
	}
	return base, nil
}

func checkMerged(base string) error {
	if _, err := os.Stat(filepath.Join(base, "merged", "marker")); err != nil {
		return fmt.Errorf("mounted, but the lower layer is not visible: %w", err)
	}
	// A write must land in upper, or the driver cannot build layers.
	if err := os.WriteFile(filepath.Join(base, "merged", "written"), []byte("x"), 0o600); err != nil {
		return fmt.Errorf("mounted, but not writable: %w", err)
	}
	return nil
}

func overlayOpts(base string) string {
	return fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
		filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"))
}

func (mountProber) Overlay(root string) error {
	base, err := probeDirs(root)
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	merged := filepath.Join(base, "merged")
	if err := syscall.Mount("overlay", merged, "overlay", 0, overlayOpts(base)); err != nil {
		return err
	}
	defer syscall.Unmount(merged, syscall.MNT_DETACH)
	return checkMerged(base)
}

func (mountProber) FuseOverlay(root string) error {
	bin, err := exec.LookPath("fuse-overlayfs")
	if err != nil {
		return fmt.Errorf("fuse-overlayfs is not installed")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("/dev/fuse is not usable (%v); give the sandbox --device /dev/fuse", err)
	}
	f.Close()
	base, err := probeDirs(root)
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	merged := filepath.Join(base, "merged")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "-o", overlayOpts(base), merged).CombinedOutput(); err != nil {
		return fmt.Errorf("fuse-overlayfs mount: %v: %s", err, strings.TrimSpace(string(out)))
	}
	defer syscall.Unmount(merged, syscall.MNT_DETACH)
	return checkMerged(base)
}

// fsType names the filesystem under path for the log.
func fsType(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "unknown filesystem"
	}
	switch uint32(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x01021994:
		return "tmpfs"
	case 0x2fc12fc1:
		return "zfs"
	case 0x65735546:
		return "fuse"
	}
	return fmt.Sprintf("filesystem 0x%x", uint32(st.Type))
}
