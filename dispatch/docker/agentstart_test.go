package docker_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// OpenCode, started as the sandbox user in the image, installs nothing from
// npm: it otherwise installs @opencode-ai/plugin into its global config
// directory on every start, a download per run in a fresh sandbox (or DNS
// and connect timeouts offline). An npm registry on the bridge records
// what reaches it; the control run, with a writable config directory,
// shows that OpenCode does go to that registry when it may.
func TestOpenCodeInTheImageInstallsNothingFromNPM(t *testing.T) {
	testenv.Long(t, "runs OpenCode in the real sandbox image")
	img := testenv.SandboxImage(t)
	t.Parallel()
	gw := dockertest.Gateway(t)
	srv, err := modeltest.New(gw+":0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	registry := startRegistry(t, gw)
	cfg, _ := json.Marshal(srv.OpenCodeConfig())

	run := func(extraEnv ...string) string {
		t.Helper()
		args := []string{"run", "--rm", "--user", "1000:1000", "--entrypoint", "sh",
			"-e", "HOME=/home/sandbox", "-e", "npm_config_registry=" + registry.url + "/",
			"-e", "OPENCODE_CONFIG_CONTENT=" + string(cfg),
			"-e", "OPENCODE_DISABLE_AUTOUPDATE=1", "-e", "OPENCODE_DISABLE_MODELS_FETCH=1"}
		for _, e := range extraEnv {
			args = append(args, "-e", e)
		}
		args = append(args, img, "-c",
			`mkdir -p /tmp/work && cd /tmp/work && echo "Say hello." | opencode run --print-logs --format json --dir /tmp/work --model "$0"`,
			srv.OpenCodeModel())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("opencode run in %s: %v\n%s", img, err, out)
		}
		if !strings.Contains(string(out), `"type":"step_finish"`) {
			t.Fatalf("opencode run in %s printed no step_finish:\n%s", img, out)
		}
		return string(out)
	}

	out := run()
	if got := registry.paths(); len(got) > 0 {
		t.Errorf("OpenCode in the image went to the npm registry: %q\n%s", got, out)
	}
	if strings.Contains(out, "background dependency install") {
		t.Errorf("OpenCode in the image tried a dependency install:\n%s", out)
	}

	// Control: the same start with a config directory the agent may write.
	run("XDG_CONFIG_HOME=/tmp/xdg-config")
	found := false
	for _, p := range registry.paths() {
		found = found || strings.Contains(p, "opencode-ai")
	}
	if !found {
		t.Errorf("control run: the registry saw %q, not OpenCode's plugin install; the check above proves nothing", registry.paths())
	}
}

// npmRegistry answers every request with 404 and records its path.
type npmRegistry struct {
	url string
	mu  sync.Mutex
	got []string
}

func startRegistry(t *testing.T, host string) *npmRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	r := &npmRegistry{url: "http://" + ln.Addr().String()}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, req.URL.Path)
		r.mu.Unlock()
		http.NotFound(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { s.Close() })
	return r
}

func (r *npmRegistry) paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}
