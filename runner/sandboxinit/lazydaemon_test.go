package sandboxinit_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// lazyScript runs as the agent in a sandbox without services: it reports
// whether a dockerd runs before and after it uses Docker, and uses it as a
// project would (load an image, run a container from it).
const lazyScript = `
set -u
state() { if pgrep -x dockerd >/dev/null; then echo "$1 dockerd"; else echo "$1 none"; fi; }
sleep 2
state BEFORE
if [ "${USE_DOCKER:-0}" = 1 ]; then
	echo "SERVER $(docker version --format '{{.Server.Version}}' 2>&1)"
	docker load -q -i "$(ls /cache/images/*.tar | head -n1)" >/dev/null || echo "LOAD failed"
	docker run -d --name lazy-inner ` + dockertest.ServiceImageRef + ` >/dev/null || echo "RUN failed"
	echo "RUN $(docker ps --filter name=lazy-inner --format '{{.Names}}')"
	state AFTER
fi
echo DONE
`

// A run without services never starts the inner daemon unless its agent
// uses Docker; then the first use starts it, transparently, through the
// agent's filtered socket.
func TestInnerDaemonStartsOnFirstUse(t *testing.T) {
	img := testenv.SandboxImage(t)
	cache := cachedService(t)
	for _, use := range []bool{false, true} {
		out := t.TempDir()
		order := writeOrder(t, t.TempDir(), sandboxcfg.Config{})
		env := "USE_DOCKER=0"
		if use {
			env = "USE_DOCKER=1"
		}
		args := append(sandboxArgs(t, order, out, cache), "--rm", "--env", env, img, "--", "bash", "-c", lazyScript)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		raw, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		cancel()
		logs := string(raw)
		if err != nil || !strings.Contains(logs, "\nDONE") {
			t.Fatalf("sandbox (%s): %v\n%s", env, err, logs)
		}
		if !strings.Contains(logs, "BEFORE none") {
			t.Errorf("%s: a dockerd ran before the agent used Docker:\n%s", env, logs)
		}
		if !strings.Contains(logs, "starts on the first use of Docker") {
			t.Errorf("%s: the init did not say it holds the daemon's socket:\n%s", env, logs)
		}
		if !use {
			if strings.Contains(logs, "started on first use") {
				t.Errorf("the daemon started although nothing used Docker:\n%s", logs)
			}
			continue
		}
		for _, want := range []string{"AFTER dockerd", "RUN lazy-inner", "inner Docker daemon started on first use"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the agent's first Docker use: output lacks %q:\n%s", want, logs)
			}
		}
		if strings.Contains(logs, "SERVER Cannot") || strings.Contains(logs, "SERVER error") {
			t.Errorf("docker version failed on first use:\n%s", logs)
		}
	}
}
