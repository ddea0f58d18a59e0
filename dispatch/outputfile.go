package dispatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// ReadOutputFile reads rel below root, a run's output, as untrusted the
// way ReadResultFile does (no link anywhere below root, a regular file, at
// most max bytes); refusals wrap bad, a missing file ErrNoResult.
func ReadOutputFile(root, rel string, max int64, bad error) ([]byte, error) {
	f, err := openOutputFile(root, rel, max, bad)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", root, rel, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s/%s grew over the %d-byte cap: %w", root, rel, max, bad)
	}
	return b, nil
}

// openOutputFile opens rel (slash-separated, below root): no component
// below root may be a symbolic link (the last one is opened with
// O_NOFOLLOW, and os.Root keeps even a link swapped in meanwhile from
// leaving root), the file must be a regular file (O_NONBLOCK: a FIFO
// cannot hang the bot) of at most max bytes. root itself is the bot's own
// task directory and is trusted.
func openOutputFile(root, rel string, max int64, bad error) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", root, ErrNotFound)
		}
		return nil, fmt.Errorf("open task directory %s: %w", root, err)
	}
	defer r.Close()
	rel = path.Clean(rel)
	if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("output path %q is not below %s", rel, root)
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		fi, err := r.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s/%s: %w", root, p, ErrNoResult)
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", root, p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s/%s is a symbolic link; the bot does not follow links the sandbox made: %w", root, p, bad)
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, fmt.Errorf("%s/%s is not a directory: %w", root, p, bad)
		}
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w (%w)", root, rel, bad, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s/%s: %w", root, rel, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s/%s is not a regular file (%s): %w", root, rel, fi.Mode().Type(), bad)
	}
	if fi.Size() > max {
		f.Close()
		return nil, fmt.Errorf("%s/%s is %d bytes, over the %d-byte cap: %w", root, rel, fi.Size(), max, bad)
	}
	return f, nil
}
