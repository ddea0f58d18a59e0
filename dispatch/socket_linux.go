package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// DialSocketBeneath connects to the Unix socket rel beneath dir, a
// directory the sandbox may have written: rel is resolved without
// following any link (openat2, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH) and
// the socket is reached through the descriptor of what was checked to be
// a socket, so a link planted there cannot turn the connection toward
// another socket. dir itself must not be a link. A socket that is not
// there, not a socket, or that nobody listens on (the process that
// offered it has exited) is ErrNoPreview; dir's own absence is an error
// wrapping unix.ENOENT.
func DialSocketBeneath(ctx context.Context, dir, rel string) (net.Conn, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("%s in %s: not offered: %v (%w)", rel, dir, err, ErrNoPreview)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s in %s is not a socket (%w)", rel, dir, ErrNoPreview)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if errors.Is(err, unix.ECONNREFUSED) {
		return nil, fmt.Errorf("%s in %s: %w (%w)", rel, dir, err, ErrNoPreview)
	}
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", rel, dir, err)
	}
	return c, nil
}
