package dockerfilter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// Workspace stages bind sources that lie in the workspace.
//
// Checking a path and then handing the same path to the engine would not
// hold: the agent owns the workspace and could swap a checked directory for
// a symlink to / before the engine mounts it (binds are resolved when the
// container starts, not when it is created). So the filter opens the
// source itself with openat2(RESOLVE_BENEATH), which refuses any walk,
// symlinks included, that leaves the workspace, and bind-mounts that open
// file onto a path under StageDir that only root can change. The engine
// gets the staged path; whatever the agent later does to the workspace's
// names, the staged mount stays the object that was checked.
type Workspace struct {
	// Root is the workspace (the runner's checkout directory).
	Root string
	// StageDir holds the staged mounts; the filter creates it 0700.
	StageDir string

	mu     sync.Mutex
	staged map[fileKey]string
	paths  map[string]bool
}

type fileKey struct{ dev, ino uint64 }

// openat2 flags (linux/openat2.h); the syscall number is the same on every
// architecture since Linux 5.6.
const (
	sysOpenat2           = 437
	resolveNoMagiclinks  = 0x02
	resolveBeneath       = 0x08
	openHowFlagsResolves = resolveBeneath | resolveNoMagiclinks
)

type openHow struct {
	flags   uint64
	mode    uint64
	resolve uint64
}

// openBeneath opens rel (relative, cleaned) under dirfd as an O_PATH file
// descriptor, following symlinks only while they stay beneath dirfd.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	p, err := syscall.BytePtrFromString(rel)
	if err != nil {
		return -1, err
	}
	how := openHow{flags: uint64(flags | syscall.O_CLOEXEC), resolve: openHowFlagsResolves}
	for {
		fd, _, errno := syscall.Syscall6(sysOpenat2, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
			uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if errno == syscall.EINTR || errno == syscall.EAGAIN {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
}

const oPath = 0x200000 // O_PATH

// relInside returns src relative to root, or an error when it is not
// inside root (after cleaning).
func relInside(root, src string) (string, error) {
	if !filepath.IsAbs(src) {
		return "", fmt.Errorf("bind source %q is not an absolute path", src)
	}
	rel, err := filepath.Rel(root, filepath.Clean(src))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", refuse("bind source %s is refused: only paths inside the workspace %s may be mounted", src, root)
	}
	return rel, nil
}

// resolve opens src beneath the workspace (creating missing directories
// when create is set) and returns an O_PATH descriptor of it.
func (w *Workspace) resolve(src string, create bool) (int, error) {
	rel, err := relInside(w.Root, src)
	if err != nil {
		return -1, err
	}
	root, err := syscall.Open(w.Root, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, refuse("bind source %s is refused: the workspace %s cannot be opened: %v", src, w.Root, err)
	}
	defer syscall.Close(root)
	fd, err := openBeneath(root, rel, oPath)
	if errors.Is(err, syscall.ENOENT) && create {
		if err := mkdirBeneath(root, rel); err != nil {
			return -1, fmt.Errorf("bind source %s: create it in the workspace: %w", src, err)
		}
		fd, err = openBeneath(root, rel, oPath)
	}
	switch {
	case errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.ELOOP):
		return -1, refuse("bind source %s is refused: a symlink on its path leads out of the workspace %s", src, w.Root)
	case errors.Is(err, syscall.ENOENT):
		return -1, fmt.Errorf("bind source %s does not exist", src)
	case err != nil:
		return -1, fmt.Errorf("bind source %s: open beneath the workspace: %w", src, err)
	}
	return fd, nil
}

// mkdirBeneath creates the missing directories of rel under root, one at
// a time and never through a symlink, owned like the workspace itself
// (the engine would create them as root).
func mkdirBeneath(root int, rel string) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(root, &st); err != nil {
		return err
	}
	cur, err := syscall.Dup(root)
	if err != nil {
		return err
	}
	defer func() { syscall.Close(cur) }()
	for _, name := range strings.Split(rel, "/") {
		if name == "." || name == "" {
			continue
		}
		next, err := openBeneath(cur, name, oPath|syscall.O_DIRECTORY)
		if errors.Is(err, syscall.ENOENT) {
			if err := syscall.Mkdirat(cur, name, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
				return err
			}
			if err := syscall.Fchownat(cur, name, int(st.Uid), int(st.Gid), 0x100 /* AT_SYMLINK_NOFOLLOW */); err != nil {
				return err
			}
			next, err = openBeneath(cur, name, oPath|syscall.O_DIRECTORY)
		}
		if err != nil {
			return err
		}
		syscall.Close(cur)
		cur = next
	}
	return nil
}

// Stage implements Binder.
func (w *Workspace) Stage(src string, create bool) (string, error) {
	fd, err := w.resolve(src, create)
	if err != nil {
		return "", err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("bind source %s: %w", src, err)
	}
	key := fileKey{uint64(st.Dev), st.Ino}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.staged[key]; ok {
		return p, nil
	}
	if err := os.MkdirAll(w.StageDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", w.StageDir, err)
	}
	// Fresh names: a restarted sandbox finds the empty staging points of
	// its previous start (their mounts went with its mount namespace).
	var target string
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		target, err = os.MkdirTemp(w.StageDir, "d")
	} else {
		var f *os.File
		if f, err = os.CreateTemp(w.StageDir, "f"); err == nil {
			target = f.Name()
			f.Close()
		}
	}
	if err != nil {
		return "", fmt.Errorf("bind source %s: make its staging point: %w", src, err)
	}
	if err := syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), target, "", syscall.MS_BIND, ""); err != nil {
		os.Remove(target)
		return "", fmt.Errorf("bind source %s: stage it at %s: %w", src, target, err)
	}
	if w.staged == nil {
		w.staged, w.paths = map[fileKey]string{}, map[string]bool{}
	}
	w.staged[key] = target
	w.paths[target] = true
	return target, nil
}

// Known implements Binder.
func (w *Workspace) Known(src string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paths[src]
}

// Close unmounts every staged source.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for p := range w.paths {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			continue
		}
		os.Remove(p)
	}
	w.staged, w.paths = nil, nil
	return errors.Join(errs...)
}
