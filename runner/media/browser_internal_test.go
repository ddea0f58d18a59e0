package media

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The browser that screenshots the agent's dev server renders hostile
// pages: it runs as the agent, not as the runner that holds the token.
func TestBrowserRunsAsTheAgent(t *testing.T) {
	chromium := testenv.Chromium(t)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root", "starting Chromium as another user needs CAP_SETUID (run the tests as root, as CI does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := launchBrowser(ctx, chromium, &syscall.Credential{Uid: 65534, Gid: 65534}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(b.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") {
			if f := strings.Fields(line); len(f) < 3 || f[1] != "65534" || f[2] != "65534" {
				t.Fatalf("Chromium runs as %q, want uid 65534", line)
			}
			return
		}
	}
	t.Fatal("no Uid line in /proc status")
}
