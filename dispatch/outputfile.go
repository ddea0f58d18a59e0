package dispatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	r, rel, _, err := openBelow(root, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %w", err, ErrNoResult)
	case errors.Is(err, errLinkBelow), errors.Is(err, errNotDirBelow):
		return nil, fmt.Errorf("%w: %w", err, bad)
	case err != nil:
		return nil, err
	}
	defer r.Close()
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
