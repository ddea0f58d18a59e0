package sandboxinit_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// miniImage makes a tiny image in the inner daemon from the sandbox's own
// dash, cat and true (nothing can be pulled): `docker import` through
// whichever socket DOCKER_HOST names.
const miniImage = `
bins="/bin/sh /bin/cat /bin/true /bin/ls"
libs=$(ldd $bins 2>/dev/null | grep -o '/[^ ]*' | sort -u)
tar -chf - $bins $libs 2>/dev/null | docker import - sandbox-test/mini:1 >/dev/null
`

// agentScript runs as the agent (the sandbox user, with the init's
// environment: DOCKER_HOST on the filter). It prints one line per attempt:
// "RESULT <name> rc=<code> :: <first line of the answer>".
const agentScript = `
set -u
svc=sandbox-test/svc:1
try() {
	local name=$1; shift
	local out rc
	out=$("$@" 2>&1 </dev/null); rc=$?
	local line
	line=$(grep -m1 -e 'sandbox docker filter' -e 'permission denied' <<<"$out" || true)
	[ -n "$line" ] || line=$(tr '\n' ' ' <<<"$out" | cut -c1-300)
	echo "RESULT $name rc=$rc :: $line"
}
echo "ID $(id)"
echo "DOCKER_HOST $DOCKER_HOST"
echo "WORKSPACE $SANDBOX_WORKSPACE"
` + miniImage + `
mini=sandbox-test/mini:1

# Host-level settings: every one refused.
try privileged docker run --rm --privileged $mini true
try bind-root docker run --rm -v /:/host $mini true
try mount-root docker run --rm --mount type=bind,source=/,target=/host $mini true
try pid-host docker run --rm --pid host $mini true
try ipc-host docker run --rm --ipc host $mini true
try network-host docker run --rm --network host $mini true
try uts-host docker run --rm --uts host $mini true
try userns-host docker run --rm --userns host $mini true
try cap-add docker run --rm --cap-add SYS_ADMIN $mini true
try device docker run --rm --device /dev/kmsg $mini true
try seccomp docker run --rm --security-opt seccomp=unconfined $mini true
try apparmor docker run --rm --security-opt apparmor=unconfined $mini true
try systempaths docker run --rm --security-opt systempaths=unconfined $mini true
try sysctl docker run --rm --sysctl net.ipv4.ip_forward=1 $mini true
try cgroup-parent docker run --rm --cgroup-parent /escape $mini true
try runtime docker run --rm --runtime io.containerd.runc.v2 $mini true
try volume-bind docker volume create --opt type=none --opt o=bind --opt device=/ rootvol
try real-socket env DOCKER_HOST=unix:///var/run/docker.sock docker ps
try bind-real-socket docker run --rm -v /var/run/docker.sock:/var/run/docker.sock $mini true
mkdir -p "$SANDBOX_WORKSPACE/proj"
ln -sfn / "$SANDBOX_WORKSPACE/proj/escape"
try symlink-escape docker run --rm -v "$SANDBOX_WORKSPACE/proj/escape:/h" $mini true
printf 'FROM sandbox-test/mini:1\n' >"$SANDBOX_WORKSPACE/proj/Dockerfile"
try build-network-host docker build --network host -t x "$SANDBOX_WORKSPACE/proj"
docker run -d --name plain $svc >/dev/null
try exec-privileged docker exec --privileged plain /svc
printf 'services:\n  bad:\n    image: sandbox-test/mini:1\n    privileged: true\n    command: ["true"]\n' >"$SANDBOX_WORKSPACE/proj/bad.yml"
try compose-privileged docker-compose -f "$SANDBOX_WORKSPACE/proj/bad.yml" -p bad up -d

# A project's normal use: every one works.
waitfor() {
	for i in $(seq 1 100); do
		[ "$(curl -fsS "$1" 2>/dev/null)" = ok ] && return 0
		sleep 0.1
	done
	echo "nothing answers on $1"
	return 1
}
proj="$SANDBOX_WORKSPACE/proj"
echo hello >"$proj/file"
service_port() { docker run -d --name web -p 18080:8080 $svc >/dev/null && waitfor http://127.0.0.1:18080/health; }
volume() {
	docker volume create data >/dev/null &&
		docker run --rm -v data:/data $mini sh -c 'echo kept >/data/f' &&
		[ "$(docker run --rm -v data:/data $mini cat /data/f)" = kept ]
}
workspace_bind() { [ "$(docker run --rm -v "$proj:/src:ro" $mini cat /src/file)" = hello ]; }
stdin_attach() { [ "$(echo piped | docker run -i --rm $mini cat)" = piped ]; }
exec_in() { docker run -d --name idle $mini sh -c 'while :; do sleep 1; done' >/dev/null && [ "$(docker exec idle ls /bin/cat)" = /bin/cat ]; }
compose() {
	printf 'version: "3"\nservices:\n  web:\n    image: sandbox-test/svc:1\n    ports: ["18081:8080"]\n    volumes: ["cdata:/data", "./:/src:ro"]\nvolumes:\n  cdata: {}\n' >"$proj/docker-compose.yml"
	(cd "$proj" && docker-compose up -d && waitfor http://127.0.0.1:18081/health && docker-compose down -v)
}
build() {
	printf 'FROM sandbox-test/mini:1\nCOPY file /file\nRUN ["/bin/cat", "/file"]\n' >"$proj/Dockerfile"
	docker build -q -t sandbox-test/built:1 "$proj" >/dev/null && [ "$(docker run --rm sandbox-test/built:1 cat /file)" = hello ]
}
buildkit_build() {
	DOCKER_BUILDKIT=1 docker build -q -t sandbox-test/built:2 "$proj" >/dev/null && [ "$(docker run --rm sandbox-test/built:2 cat /file)" = hello ]
}
logs() { docker logs web 2>&1 | grep -q listening; }
try service-port service_port
try volume volume
try workspace-bind workspace_bind
try stdin-attach stdin_attach
try exec exec_in
try compose compose
try build build
try buildkit-build buildkit_build
try logs logs
echo DONE
`

// The agent's Docker, in a real sandbox: each host-level setting is
// refused with an error naming it, the real socket cannot be opened, and a
// project's ordinary Docker use (a service on a published port, a named
// volume, a workspace bind, compose, a classic and a BuildKit build, exec,
// attach with stdin) works through the filter. In the caps profile and
// behind gVisor.
func TestAgentDockerIsFiltered(t *testing.T) {
	testenv.Long(t, "runs a sandbox and about fifty inner containers")
	dockertest.ForEachProfile(t, agentDockerIsFiltered)
}

func agentDockerIsFiltered(t *testing.T, iso dispatch.Isolation) {
	img := testenv.SandboxImage(t)
	cache := cachedService(t)
	out := t.TempDir()
	order := writeOrder(t, t.TempDir(), sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
		"svc": {Image: dockertest.ServiceImageRef, Ports: []int{8080}},
	}})
	args := append(sandboxArgsIn(t, dockertest.Profile(t, iso), order, out, cache), "--rm", "--env", "SANDBOX_LOG_LEVEL=warn", img, "--", "bash", "-c", agentScript)
	// About fifty docker commands: minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	raw, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	logs := string(raw)
	if err != nil {
		t.Fatalf("sandbox: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, "\nDONE") {
		t.Fatalf("the script did not finish:\n%s", logs)
	}
	results := map[string]string{}
	for _, l := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			name, v, _ := strings.Cut(rest, " ")
			results[name] = v
		}
	}
	for _, w := range []string{"ID uid=1000(sandbox)", "DOCKER_HOST unix:///run/sandbox/docker.sock", "WORKSPACE /workspace"} {
		if !strings.Contains(logs, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if strings.Contains(logs, "(docker)") {
		t.Errorf("the agent is in the docker group:\n%s", logs)
	}
	refused := map[string]string{
		"privileged":         "HostConfig.Privileged is refused",
		"bind-root":          "bind source / is refused",
		"mount-root":         "bind source / is refused",
		"pid-host":           "HostConfig.PidMode=host is refused",
		"ipc-host":           "HostConfig.IpcMode=host is refused",
		"network-host":       "HostConfig.NetworkMode=host is refused",
		"uts-host":           "HostConfig.UTSMode=host is refused",
		"userns-host":        "HostConfig.UsernsMode=host is refused",
		"cap-add":            "HostConfig.CapAdd is refused",
		"device":             "HostConfig.Devices is refused",
		"seccomp":            `SecurityOpt "seccomp=unconfined" is refused`,
		"apparmor":           `SecurityOpt "apparmor=unconfined" is refused`,
		"systempaths":        "refused",
		"sysctl":             "HostConfig.Sysctls is refused",
		"cgroup-parent":      "HostConfig.CgroupParent is refused",
		"runtime":            "HostConfig.Runtime",
		"volume-bind":        "type=none is refused",
		"real-socket":        "permission denied",
		"bind-real-socket":   "bind source /var/run/docker.sock is refused",
		"symlink-escape":     "a symlink on its path leads out of the workspace",
		"build-network-host": "docker build --network=host is refused",
		"exec-privileged":    "exec Privileged is refused",
		"compose-privileged": "HostConfig.Privileged is refused",
	}
	for name, want := range refused {
		got, ok := results[name]
		switch {
		case !ok:
			t.Errorf("%s: not tried", name)
		case strings.HasPrefix(got, "rc=0 "):
			t.Errorf("%s: allowed: %s", name, got)
		case !strings.Contains(got, want):
			t.Errorf("%s: answer %q lacks %q", name, got, want)
		}
	}
	for _, name := range []string{"service-port", "volume", "workspace-bind", "stdin-attach", "exec", "compose", "build", "buildkit-build", "logs"} {
		if got := results[name]; !strings.HasPrefix(got, "rc=0 ") {
			t.Errorf("%s: failed through the filter: %q", name, got)
		}
	}
	if t.Failed() {
		t.Logf("sandbox output:\n%s", logs)
	}
}

// BenchmarkDockerFilter times `docker run --rm IMAGE true` inside one
// sandbox, through the filter and straight on the real socket (as root),
// alternating, and reports both and their ratio (the filter's target:
// at most 1.10).
func BenchmarkDockerFilter(b *testing.B) {
	testenv.Long(b, "runs a sandbox")
	img := testenv.SandboxImage(b)
	name := fmt.Sprintf("sandbox-filter-bench-%d", os.Getpid())
	exec.Command("docker", "rm", "-f", name).Run()
	args := append([]string{"run", "--detach", "--name", name}, capsProfile...)
	args = append(args, "--mount", "type=bind,source="+b.TempDir()+",target=/var/lib/docker",
		img, "--", "sleep", "infinity")
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		b.Fatalf("docker run: %v\n%s", err, out)
	}
	b.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if exec.Command("docker", "exec", name, "test", "-S", "/run/sandbox/docker.sock").Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			b.Fatalf("the filter socket never appeared:\n%s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("docker", "exec", name, "bash", "-c", miniImage).CombinedOutput(); err != nil {
		b.Fatalf("make the mini image: %v\n%s", err, out)
	}
	// One warm-up run each, then b.N alternating pairs timed in the
	// sandbox itself, so docker exec's own cost is in neither figure.
	script := `
run() { DOCKER_HOST=$1 docker run --rm sandbox-test/mini:1 true; }
run unix:///run/sandbox/docker.sock && run unix:///var/run/docker.sock || exit 1
filtered=0 direct=0
for i in $(seq 1 ` + strconv.Itoa(b.N) + `); do
	t0=$(date +%s%N); run unix:///run/sandbox/docker.sock || exit 1
	t1=$(date +%s%N); run unix:///var/run/docker.sock || exit 1
	t2=$(date +%s%N)
	filtered=$((filtered + t1 - t0)); direct=$((direct + t2 - t1))
done
echo "$filtered $direct"`
	b.ResetTimer()
	out, err := exec.Command("docker", "exec", name, "bash", "-c", script).CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("benchmark script: %v\n%s", err, out)
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) != 2 {
		b.Fatalf("benchmark script printed %q", out)
	}
	filtered, _ := strconv.ParseFloat(f[0], 64)
	direct, _ := strconv.ParseFloat(f[1], 64)
	b.ReportMetric(filtered/float64(b.N)/1e6, "filtered-ms/run")
	b.ReportMetric(direct/float64(b.N)/1e6, "direct-ms/run")
	b.ReportMetric(filtered/direct, "ratio")
}
