package runtest_test

import (
	"reflect"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

func TestParseConnections(t *testing.T) {
	log := `82    09:03:54.955737 connect(20, {sa_family=AF_INET, sin_port=htons(34219), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS (Operation now in progress)
83    09:03:55.000000 connect(5, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0
84    09:03:55.100000 sendto(7, "\x12\x34"..., 40, MSG_NOSIGNAL, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 40
85    09:03:55.200000 sendto(13, [{nlmsg_len=20, nlmsg_type=RTM_GETLINK}], 20, 0, {sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, 12) = 20
86    09:03:55.300000 connect(9, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("10.1.2.3")}, 16) = -1 ECONNREFUSED (Connection refused)
`
	got := runtest.ParseConnections([]byte(log))
	want := []runtest.Connection{
		{Syscall: "connect", Addr: "127.0.0.1:34219"},
		{Syscall: "sendto", Addr: "[::1]:53"},
		{Syscall: "connect", Addr: "10.1.2.3:443"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseConnections = %v, want %v", got, want)
	}
	if rest := runtest.Except(got, "127.0.0.1:34219"); len(rest) != 2 || rest[0].Addr != "[::1]:53" {
		t.Fatalf("Except = %v", rest)
	}
}
