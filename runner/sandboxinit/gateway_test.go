package sandboxinit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// readableBy decides, the way the kernel does for an unprivileged user,
// whether the sandbox user could open the providers file.
func TestReadableBy(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	st0, _ := os.Stat(p)
	uid, gid := int(st0.Sys().(*syscall.Stat_t).Uid), int(st0.Sys().(*syscall.Stat_t).Gid)
	owner := account{Name: "owner", UID: uid, GID: gid + 1}
	member := account{Name: "member", UID: uid + 1, GID: gid + 1, Groups: []int{gid}}
	other := account{Name: "other", UID: uid + 1, GID: gid + 1}
	for _, tc := range []struct {
		mode                 os.FileMode
		owner, member, other bool
	}{
		{0o400, true, false, false},
		{0o000, false, false, false},
		{0o440, true, true, false},
		{0o404, true, false, true},
		{0o044, false, true, true},
	} {
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		for _, c := range []struct {
			a    account
			want bool
		}{{owner, tc.owner}, {member, tc.member}, {other, tc.other}} {
			if got := readableBy(st, c.a); got != c.want {
				t.Errorf("mode %v, %s: readable = %v, want %v", tc.mode, c.a.Name, got, c.want)
			}
		}
	}
}

// Where the directory cannot be mounted over (no CAP_SYS_ADMIN), a file the
// sandbox user could read stops the start; one it cannot read is left as
// it is; with no second identity it is allowed, with a warning. A mount
// that leaves the file visible is an error too. (The real mount is
// exercised in the sandbox image: dispatch/docker's gateway test.)
func TestHideGatewayFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "gateway", "providers.json")
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte("{}"), 0o400); err != nil {
		t.Fatal(err)
	}
	refused := func(string) error { return syscall.EPERM }
	me := account{Name: "me", UID: os.Geteuid(), GID: os.Getegid()}
	err := hideGatewayFile(zerolog.Nop(), p, &me, refused)
	if err == nil || !strings.Contains(err.Error(), "can read it") {
		t.Fatalf("readable by the sandbox user: %v", err)
	}
	other := account{Name: "other", UID: os.Geteuid() + 1, GID: os.Getegid() + 1}
	if err := hideGatewayFile(zerolog.Nop(), p, &other, refused); err != nil {
		t.Fatalf("unreadable by the sandbox user: %v", err)
	}
	if err := hideGatewayFile(zerolog.Nop(), p, nil, refused); err != nil {
		t.Fatalf("no second identity: %v", err)
	}
	noop := func(string) error { return nil }
	if err := hideGatewayFile(zerolog.Nop(), p, &other, noop); err == nil || !strings.Contains(err.Error(), "still visible") {
		t.Fatalf("a mount that hides nothing: %v", err)
	}
	hides := func(dir string) error { return os.RemoveAll(dir) }
	if err := hideGatewayFile(zerolog.Nop(), p, &other, hides); err != nil {
		t.Fatalf("a mount that hides the file: %v", err)
	}
}
