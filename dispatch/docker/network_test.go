package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// A network with inter-container communication off keeps sandboxes apart
// on IPv4; with IPv6 on, the engine keeps them apart there only when its
// daemon runs ip6tables, which no client can see: the backend refuses it,
// and takes the same network without IPv6.
func TestNetworkWithIPv6IsRefused(t *testing.T) {
	t.Parallel()
	testenv.Docker(t)
	for _, v6 := range []bool{true, false} {
		name := fmt.Sprintf("sandbox-bot-test-v6-%d-%t", os.Getpid(), v6)
		args := []string{"network", "create", "--driver", "bridge", "--opt", iccOption + "=false"}
		if v6 {
			args = append(args, "--ipv6", "--subnet", "fd42:5b07:"+fmt.Sprintf("%x", os.Getpid()%0xffff)+"::/64")
		}
		if out, err := exec.Command("docker", append(args, name)...).CombinedOutput(); err != nil {
			t.Fatalf("docker network create: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", name).Run() })
		b := unitBackend(t, func(o *Options) { o.Docker = "docker"; o.Network = name })
		err := b.ensureNetwork(context.Background())
		switch {
		case v6 && (err == nil || !strings.Contains(err.Error(), "IPv6 on")):
			t.Errorf("an IPv6 bridge with icc off: %v, want it refused for IPv6", err)
		case !v6 && err != nil && strings.Contains(err.Error(), "IPv6"):
			t.Errorf("an IPv4 bridge with icc off: %v", err)
		}
	}
}
