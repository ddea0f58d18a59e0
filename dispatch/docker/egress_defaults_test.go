package docker_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// probeScript checks the network from inside a sandbox, as the agent and
// from an inner container the agent starts, and looks at its caches. Each
// curl line ends in curl's exit code: 7 is "connection refused", what the
// fence's TCP reset gives; 28 would be a timeout.
const probeScript = `set -u
probe() { curl -sS -m 20 --noproxy '*' "$2" > "$1.txt" 2>&1; echo " curl=$?" >> "$1.txt"; }
probe bot "$BOT_URL"
probe ok "$OK_URL"
probe host "$HOST_URL"
probe hostip "$HOST_INNER"
probe metadata http://169.254.169.254/latest/meta-data/
docker load --quiet --input "$PROBE_TAR" > load.txt 2>&1
docker run --rm "$PROBE_IMAGE" "$BOT_INNER" "$OK_INNER" http://169.254.169.254/latest/meta-data/ "$HOST_INNER" > inner.txt 2>&1
touch "$npm_config_cache/from-$REPO_TAG"
ls -A "$npm_config_cache" > npm-ls.txt
{ touch /cache/images/agent-wrote 2>/dev/null; echo "images rc=$?"; touch /cache/images-seed/agent-wrote 2>/dev/null; echo "seed rc=$?"; } > cache-write.txt
echo '{"type":"tool_use","tool":"write","input":{"filePath":"bot.txt"}}'
while [ ! -e /sandbox/out/go ]; do sleep 0.1; done
echo 'Probed.'`

// Without network.allow a sandbox still cannot reach link-local addresses
// or the bot's listener (a server on the bridge gateway stands in for it),
// neither as the agent nor from an inner container, and both fail at once;
// the git server and another server on the same gateway still answer.
// Package caches are the repository's own: a second repository's sandbox
// does not see what the first one's agent wrote, and the agent can write
// neither image cache. In the caps profile and behind gVisor.
func TestEgressDefaults(t *testing.T) {
	dockertest.ForEachProfile(t, egressDefaults)
}

func egressDefaults(t *testing.T, iso dispatch.Isolation) {
	img := testenv.SandboxImage(t)
	probe := dockertest.ProbeImage(t)
	f := &fixture{svc: dockertest.ServiceImage(t)}
	f.remote = runtest.NewRemote(t, map[string]string{"README.md": "# demo\n"})
	f.git = dockertest.ServeGit(t, f.remote.Dir, "tok-1")
	f.cache = t.TempDir()
	botPort, botHits := serveOnGateway(t, "the bot itself")
	okPort, okHits := serveOnGateway(t, "allowed-ok")
	// Another service of the host's, not listed: behind the host wall.
	hostPort, hostHits := serveOnGateway(t, "the host's own service")
	gw := dockertest.Gateway(t)
	gitURL, err := url.Parse(f.git.URL)
	if err != nil {
		t.Fatal(err)
	}
	hostAllow, err := dispatch.ParseHostAllow(gw + ":" + okPort + "," + dispatch.HostGatewayName + ":" + gitURL.Port())
	if err != nil {
		t.Fatal(err)
	}
	b, err := docker.New(docker.Options{
		Image: img, Isolation: iso, DataDir: t.TempDir(), CacheDir: f.cache, StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		// As the bot configures it from SANDBOX_LISTEN: every address.
		BotListen: []string{":" + botPort},
		// The host wall as the bot raises it: the listed ports alone.
		HostWall: true, HostAllow: hostAllow,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := b.CacheImage(ctx, probe); err != nil {
		t.Fatal(err)
	}
	env := func(repoTag string) map[string]string {
		return map[string]string{
			"BOT_URL": "http://host.docker.internal:" + botPort + "/", "OK_URL": "http://host.docker.internal:" + okPort + "/",
			"BOT_INNER": "http://" + gw + ":" + botPort + "/", "OK_INNER": "http://" + gw + ":" + okPort + "/",
			"HOST_URL": "http://host.docker.internal:" + hostPort + "/", "HOST_INNER": "http://" + gw + ":" + hostPort + "/",
			"PROBE_IMAGE": probe, "PROBE_TAR": dispatch.CachedImageFile("/cache/images-seed", probe), "REPO_TAG": repoTag,
		}
	}
	specFor := func(id, repo, tag string) dispatch.RunSpec {
		spec := f.spec(id, dispatch.ModeExecute, sandboxcfg.Config{Harness: "command", Command: probeScript, Env: env(tag)})
		spec.Meta.Repo, spec.Order.Repo = repo, repo
		return spec
	}
	demo := specFor("T-E6E5D001", "acme/demo", "demo")
	f.submit(t, ctx, demo)
	wd := wait(ctx, f.b, demo.Meta.TaskID)
	wd.until(t, ctx, "the demo agent's probes", toolIs("write"))

	// A second repository starts after the first one's agent wrote its cache.
	other := specFor("T-E6E5D002", "acme/other", "other")
	f.submit(t, ctx, other)
	wo := wait(ctx, f.b, other.Meta.TaskID)
	wo.until(t, ctx, "the other agent's probes", toolIs("write"))

	out := dockertest.SandboxRules(t, "sandbox-"+demo.Meta.TaskID+"-execute")
	for _, want := range []string{
		"-A OUTPUT -j SANDBOX-DENY",
		"-A DOCKER-USER -j SANDBOX-DENY",
		"-A SANDBOX-DENY -d 169.254.0.0/16 -p tcp -j REJECT --reject-with tcp-reset",
		"-A SANDBOX-DENY -d " + gw + "/32 -p tcp -m tcp --dport " + botPort + " -j REJECT --reject-with tcp-reset",
	} {
		if want = dockertest.Rule(iso, want); !strings.Contains(out, want) {
			t.Errorf("sandbox rules lack %q:\n%s", want, out)
		}
	}
	for _, s := range []dispatch.RunSpec{demo, other} {
		if err := os.WriteFile(filepath.Join(f.b.OutputDir(s.Meta.TaskID), "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []*waiter{wd, wo} {
		if st := w.result(t); st.ExitCode != 0 {
			t.Fatalf("run = %+v", st)
		}
	}
	file := func(spec dispatch.RunSpec, name string) string {
		t.Helper()
		got, ok := f.remote.File(t, spec.Order.TargetBranch, name)
		if !ok {
			t.Fatalf("%s not pushed to %s", name, spec.Order.TargetBranch)
		}
		return strings.TrimSpace(got)
	}
	for _, s := range []dispatch.RunSpec{demo, other} {
		if got := file(s, "bot.txt"); !strings.HasSuffix(got, "curl=7") {
			t.Errorf("%s: the agent reaching the bot's listener: %q, want refused at once (curl=7)", s.Meta.Repo, got)
		}
		if got := file(s, "metadata.txt"); !strings.HasSuffix(got, "curl=7") {
			t.Errorf("%s: the agent reaching 169.254.169.254: %q, want refused at once (curl=7)", s.Meta.Repo, got)
		}
		for _, name := range []string{"host.txt", "hostip.txt"} {
			if got := file(s, name); !strings.HasSuffix(got, "curl=7") {
				t.Errorf("%s: the agent reaching the host's unlisted service (%s): %q, want refused at once (curl=7)", s.Meta.Repo, name, got)
			}
		}
		if got := file(s, "ok.txt"); got != "allowed-ok curl=0" {
			t.Errorf("%s: the agent reaching another server on the gateway: %q", s.Meta.Repo, got)
		}
		inner := file(s, "inner.txt")
		for _, want := range []string{
			"http://" + gw + ":" + botPort + "/ refused",
			"http://" + gw + ":" + okPort + "/ ok allowed-ok",
			"http://169.254.169.254/latest/meta-data/ refused",
			"http://" + gw + ":" + hostPort + "/ refused",
		} {
			if !strings.Contains(inner, want) {
				t.Errorf("%s: inner container probes lack %q:\n%s\n(load: %s)", s.Meta.Repo, want, inner, file(s, "load.txt"))
			}
		}
		if got := file(s, "cache-write.txt"); got != "images rc=1\nseed rc=1" {
			t.Errorf("%s: the agent writing the image caches: %q, want both refused", s.Meta.Repo, got)
		}
	}
	if got := file(demo, "npm-ls.txt"); got != "from-demo" {
		t.Errorf("demo's npm cache holds %q", got)
	}
	if got := file(other, "npm-ls.txt"); got != "from-other" {
		t.Errorf("other's npm cache holds %q, want only its own file (no from-demo)", got)
	}
	for repo, name := range map[string]string{"acme%2Fdemo": "from-demo", "acme%2Fother": "from-other"} {
		if _, err := os.Stat(filepath.Join(f.cache, "repos", repo, "npm", name)); err != nil {
			t.Errorf("the npm cache of %s is not its own directory on the host: %v", repo, err)
		}
	}
	if n := hostHits.Load(); n != 0 {
		t.Errorf("the host's unlisted service got %d requests", n)
	}
	if n := botHits.Load(); n != 0 {
		t.Errorf("the bot's stand-in got %d requests", n)
	}
	if n := okHits.Load(); n != 4 {
		t.Errorf("the allowed server got %d requests, want 4 (agent and inner container, two sandboxes)", n)
	}
	if log := sandboxLog(t, demo.Meta.TaskID, demo.Meta.Mode); !strings.Contains(log, `"message":"egress defaults enforced"`) {
		t.Error("the sandbox log does not record the egress defaults")
	}
}
