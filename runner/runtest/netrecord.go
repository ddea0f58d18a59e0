package runtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Connection is one attempt of a traced process to reach an IP address:
// a connect, or a datagram sent to an address (a DNS query).
type Connection struct {
	Syscall string
	Addr    string // host:port
}

func (c Connection) String() string { return c.Syscall + " " + c.Addr }

// straceAddr matches an IPv4 or IPv6 socket address in strace's output.
var straceAddr = regexp.MustCompile(`(connect|sendto|sendmsg|sendmmsg)\(.*?sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), (?:sin6_flowinfo=htonl\(\d+\), )?(?:sin_addr=inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")`)

// RecordConnections runs cmd (an agent CLI) under strace and returns every
// attempt of it or its children to reach an IP address, in order, and
// cmd's combined output. Unix sockets and netlink are not attempts. It
// fails the test if strace is missing or cmd fails.
func RecordConnections(t testing.TB, cmd *exec.Cmd) ([]Connection, string) {
	t.Helper()
	strace := testenv.Binary(t, "strace", "apt-get install strace")
	log := filepath.Join(t.TempDir(), "strace.log")
	args := append([]string{"-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-e", "signal=none", "-o", log, "--"}, cmd.Args...)
	traced := exec.Command(strace, args...)
	traced.Dir, traced.Env, traced.Stdin = cmd.Dir, cmd.Env, cmd.Stdin
	var out bytes.Buffer
	traced.Stdout, traced.Stderr = &out, &out
	if err := traced.Run(); err != nil {
		t.Fatalf("%s under strace: %v\n%s", cmd.Path, err, out.String())
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return ParseConnections(b), out.String()
}

// ParseConnections reads the attempts out of strace's output.
func ParseConnections(b []byte) []Connection {
	var out []Connection
	for _, line := range bytes.Split(b, []byte("\n")) {
		m := straceAddr.FindSubmatch(line)
		if m == nil {
			continue
		}
		host := string(m[3]) + string(m[4])
		port, _ := strconv.Atoi(string(m[2]))
		out = append(out, Connection{Syscall: string(m[1]), Addr: net.JoinHostPort(host, strconv.Itoa(port))})
	}
	return out
}

// Except is conns without those to addr.
func Except(conns []Connection, addr string) []Connection {
	var out []Connection
	for _, c := range conns {
		if c.Addr != addr {
			out = append(out, c)
		}
	}
	return out
}

// DeadAddr is a loopback address nothing listens on (a port just closed).
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(fmt.Errorf("close %s: %w", addr, err))
	}
	return addr
}
