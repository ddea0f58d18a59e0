package runner

import (
	"fmt"
	"syscall"
	"unsafe"
)

// dropInheritableCaps clears the ambient and inheritable capability sets
// of every thread of the runner and sets no_new_privs.
//
// The init starts the runner with CAP_SETUID, CAP_SETGID, CAP_KILL and
// CAP_CHOWN as ambient capabilities, the only way a non-root program gets
// capabilities across execve without file capabilities. Ambient
// capabilities also survive the runner's own execve of the agent, and a
// uid change between two non-zero uids keeps them: left in place, the
// agent would start with CAP_SETUID. Cleared here, the runner keeps them
// in its permitted and effective sets (what setuid(2) and kill(2) check)
// and a child that execs as the agent gets none. Capabilities are per
// thread and the Go runtime has several threads already, hence
// AllThreadsSyscall (which needs a cgo-free binary, as the image builds it).
func dropInheritableCaps() error {
	hdr := capHeader{version: linuxCapabilityVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	data[0].inheritable, data[1].inheritable = 0, 0
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset (clear inheritable on all threads): %w", e)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0); e != 0 {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL) on all threads: %w", e)
	}
	// Nothing the agent execs (a setuid binary, a file with capabilities)
	// may gain privileges either.
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS) on all threads: %w", e)
	}
	return nil
}

const (
	linuxCapabilityVersion3 = 0x20080522
	prCapAmbient            = 47
	prCapAmbientClearAll    = 4
	prSetNoNewPrivs         = 38
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}
