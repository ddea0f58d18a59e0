package sandboxinit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// A mountinfo excerpt of a caps-profile container on a cgroup v1 host.
const capsMountinfo = `1386 1180 0:133 / / rw,relatime master:615 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
1388 1386 0:136 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
1389 1388 0:137 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
1390 1389 0:29 /docker/1b96bc2f /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime master:11 - cgroup cgroup rw,cpu
1391 1389 0:34 /docker/1b96bc2f /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:16 - cgroup cgroup rw,memory
1400 1386 254:0 /work/data/tasks/T-1/docker /var/lib/docker rw,relatime - ext4 /dev/vda rw,discard
1401 1386 254:0 /tmp/with\040space /mnt/with\040space rw,relatime - ext4 /dev/vda rw
`

func TestParseMountinfo(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(capsMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("got %d mounts, want 7", len(ms))
	}
	cpu := ms[3]
	if cpu.MountPoint != "/sys/fs/cgroup/cpu" || cpu.FSType != "cgroup" || cpu.Root != "/docker/1b96bc2f" || !cpu.readOnly() {
		t.Errorf("cpu mount = %+v", cpu)
	}
	if ms[2].readOnly() {
		t.Errorf("/sys/fs/cgroup tmpfs is rw, parsed as read-only")
	}
	if ms[6].MountPoint != "/mnt/with space" {
		t.Errorf("octal escape not undone: %q", ms[6].MountPoint)
	}
	if _, err := parseMountinfo(strings.NewReader("1 2 3\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("malformed line: err = %v, want one naming line 1", err)
	}
}

func TestRemountFlagsKeepsOtherFlagsAndDropsReadOnly(t *testing.T) {
	f := remountFlags([]string{"ro", "nosuid", "nodev", "noexec", "relatime"})
	want := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_RELATIME)
	if f != want {
		t.Errorf("flags = %#x, want %#x", f, want)
	}
	if f&syscall.MS_RDONLY != 0 {
		t.Error("read-only flag kept")
	}
}

type fakeProber struct{ overlay, fuse error }

func (p fakeProber) Overlay(string) error     { return p.overlay }
func (p fakeProber) FuseOverlay(string) error { return p.fuse }

func TestChooseStorageOrder(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name      string
		forced    string
		p         fakeProber
		want      string
		reasonHas []string
	}{
		{"overlay works", "", fakeProber{}, driverOverlay2, []string{"overlay2: overlay mount on"}},
		{"overlay refused, fuse works", "", fakeProber{overlay: syscall.EINVAL}, driverFuse,
			[]string{"overlay2 rejected", "invalid argument", "fuse-overlayfs: mount works"}},
		{"neither", "", fakeProber{overlay: syscall.EINVAL, fuse: errors.New("/dev/fuse is not usable")}, driverVFS,
			[]string{"overlay2 rejected", "fuse-overlayfs rejected: /dev/fuse is not usable", "vfs: always works"}},
		{"forced", driverVFS, fakeProber{}, driverVFS, []string{"forced by " + envStorageDriver}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := chooseStorage(c.forced, dir, c.p)
			if got.Driver != c.want {
				t.Errorf("driver = %s, want %s (%s)", got.Driver, c.want, got)
			}
			all := strings.Join(got.Reasons, "\n")
			for _, w := range c.reasonHas {
				if !strings.Contains(all, w) {
					t.Errorf("reasons %q lack %q", all, w)
				}
			}
		})
	}
}

func TestMountProberOnThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("trial mounts need root")
	}
	dir := t.TempDir()
	err := mountProber{}.Overlay(dir)
	// Either answer is legitimate here; what matters is that the probe
	// cleans up after itself and names the reason when it refuses.
	t.Logf("overlay probe in %s (%s): %v", dir, fsType(dir), err)
	left, _ := filepath.Glob(filepath.Join(dir, ".storage-probe-*"))
	if len(left) != 0 {
		t.Errorf("probe directories left behind: %v", left)
	}
}

func TestSplitHTTPCheck(t *testing.T) {
	cases := []struct {
		in       string
		ports    []int
		port     int
		path     string
		errorHas string
	}{
		{"/health", []int{8080}, 8080, "/health", ""},
		{"9000:/ready", []int{8080}, 9000, "/ready", ""},
		{"/health", nil, 0, "", "lists no ports"},
		{"abc:/x", nil, 0, "", "not a number"},
		{"health", []int{1}, 0, "", "neither /path nor port:/path"},
	}
	for _, c := range cases {
		port, path, err := splitHTTPCheck(c.in, c.ports)
		if c.errorHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errorHas) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.errorHas)
			}
			continue
		}
		if err != nil || port != c.port || path != c.path {
			t.Errorf("%q = %d %q %v, want %d %q", c.in, port, path, err, c.port, c.path)
		}
	}
}

func TestProbeForPicksTheConfiguredKind(t *testing.T) {
	d := dockerCLI{bin: "docker"}
	cases := []struct {
		svc  sandboxcfg.Service
		want string
	}{
		{sandboxcfg.Service{}, "running"},
		{sandboxcfg.Service{Ports: []int{6379}}, "tcp 10.0.0.2:6379"},
		{sandboxcfg.Service{Ports: []int{80}, Healthcheck: &sandboxcfg.Healthcheck{TCP: 81}}, "tcp 10.0.0.2:81"},
		{sandboxcfg.Service{Ports: []int{80}, Healthcheck: &sandboxcfg.Healthcheck{HTTP: "/h"}}, "http http://10.0.0.2:80/h"},
		{sandboxcfg.Service{Healthcheck: &sandboxcfg.Healthcheck{Command: []string{"pg_isready"}}}, "command pg_isready"},
	}
	// The init reads services as resolved: a healthcheck, or TCP on the
	// first port, or none.
	resolved := func(s sandboxcfg.Service) sandboxcfg.ResolvedService {
		s.Image = "img"
		return sandboxcfg.MustResolve(sandboxcfg.Config{Services: map[string]sandboxcfg.Service{"x": s}}).Services["x"]
	}
	for _, c := range cases {
		p, err := probeFor(d, "x", "10.0.0.2", resolved(c.svc))
		if err != nil {
			t.Fatal(err)
		}
		if p.String() != c.want {
			t.Errorf("probe = %s, want %s", p, c.want)
		}
	}
	if ep, _ := probeFor(d, "a", "10.0.0.2", resolved(sandboxcfg.Service{Healthcheck: &sandboxcfg.Healthcheck{Command: []string{"true"}}})); ep.(execProbe).container != "service-a" {
		t.Errorf("one-letter service probes container %q, want service-a", ep.(execProbe).container)
	}
}

func TestWaitHealthyTCPBecomesReady(t *testing.T) {
	// Reserve a port, then start listening on it only after a while: the
	// probe has to keep trying rather than sleep a fixed time.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ready := make(chan net.Listener, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ready <- nil
			return
		}
		ready <- l
	}()
	err = waitHealthy(context.Background(), tcpProbe{addr: addr}, 10*time.Second, func(context.Context) error { return nil })
	if l := <-ready; l != nil {
		defer l.Close()
	} else {
		t.Skip("port taken by someone else meanwhile")
	}
	if err != nil {
		t.Fatalf("waitHealthy: %v", err)
	}
}

func TestWaitHealthyHTTPStatus(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	if err := waitHealthy(context.Background(), newHTTPProbe(srv.URL+"/health"), 10*time.Second, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("waitHealthy: %v", err)
	}
	if calls != 3 {
		t.Errorf("probed %d times, want 3 (two 503s, then a redirect counts as up)", calls)
	}
}

func TestWaitHealthyGivesUpWithTheLastError(t *testing.T) {
	p := newHTTPProbe("http://127.0.0.1:1/health")
	err := waitHealthy(context.Background(), p, 300*time.Millisecond, func(context.Context) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not healthy after 300ms") || !strings.Contains(err.Error(), "http://127.0.0.1:1/health") {
		t.Errorf("err = %v", err)
	}
}

func TestWaitHealthyStopsWhenTheServiceDies(t *testing.T) {
	p := tcpProbe{addr: "127.0.0.1:1"}
	died := errors.New("container is exited with code 1")
	start := time.Now()
	err := waitHealthy(context.Background(), p, time.Minute, func(context.Context) error { return died })
	if !errors.Is(err, died) {
		t.Fatalf("err = %v, want the liveness error", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("waited %s for a dead service", time.Since(start))
	}
}

func TestExpandSecretsOnlyBraced(t *testing.T) {
	env := map[string]string{"PW": "s3cret", "USER": "u"}
	got := expandSecrets("postgres://${USER}:${PW}@{db}/$HOME", func(k string) string { return env[k] })
	if got != "postgres://u:s3cret@{db}/$HOME" {
		t.Errorf("got %q", got)
	}
}

// A service's environment reaches the daemon in the create request (never
// a command line), with ${VAR} expanded from the sandbox's secrets.
func TestServiceEnvExpandsSecrets(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"PW": "hunter2"}[k] }
	env, err := serviceEnv("db", map[string]string{"POSTGRES_PASSWORD": "${PW}", "A": "1"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(env, "\n") != "A=1\nPOSTGRES_PASSWORD=hunter2" {
		t.Errorf("env = %q", env)
	}
	if _, err := serviceEnv("db", map[string]string{"X": "a\nb"}, getenv); err == nil || !strings.Contains(err.Error(), "services.db.env.X") {
		t.Errorf("newline value: err = %v", err)
	}
}

func TestImageCacheNamesAndSweep(t *testing.T) {
	dir := t.TempDir()
	c := imageCache{dir: dir, log: zerolog.Nop()}
	refs := []string{"redis:7", "ghcr.io/o/svc:1.2", "localhost:5000/x@sha256:abc"}
	for _, r := range refs {
		if err := os.WriteFile(c.path(r), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if filepath.Base(c.path("redis:7")) != "redis%3A7.tar" {
		t.Errorf("cache file = %s", c.path("redis:7"))
	}
	// A killed save leaves a temporary file: never listed, swept when old.
	old := filepath.Join(dir, dispatch.CacheTmpPrefix+"1-2.tar")
	fresh := filepath.Join(dir, dispatch.CacheTmpPrefix+"3-4.tar")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.refs(), ",")
	for _, r := range refs {
		if !strings.Contains(got, r) {
			t.Errorf("refs %q lack %q", got, r)
		}
	}
	if strings.Contains(got, "partial") || len(c.refs()) != 3 {
		t.Errorf("refs = %q", got)
	}
	c.sweep()
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old temporary file not swept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file (a live sandbox's save) was removed: %v", err)
	}
}

func TestParseSupabaseStatus(t *testing.T) {
	out := `Stopped services: [supabase_imgproxy_x]
{"API_URL":"http://127.0.0.1:54321","GRAPHQL_URL":"http://127.0.0.1:54321/graphql/v1","DB_URL":"postgresql://postgres:postgres@127.0.0.1:54322/postgres","STUDIO_URL":"http://127.0.0.1:54323","MAILPIT_URL":"http://127.0.0.1:54324","INBUCKET_URL":"http://127.0.0.1:54324","ANON_KEY":"eyJanon","SERVICE_ROLE_KEY":"eyJservice","JWT_SECRET":"super-secret"}`
	s, err := parseSupabaseStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	want := dispatch.Services{
		"supabase_kong": "127.0.0.1:54321", "supabase_api": "127.0.0.1:54321",
		"supabase_db": "127.0.0.1:54322", "supabase_studio": "127.0.0.1:54323",
		"supabase_mail": "127.0.0.1:54324", "supabase_inbucket": "127.0.0.1:54324",
	}
	if fmt.Sprint(s.Services) != fmt.Sprint(want) {
		t.Errorf("services = %v\nwant %v", s.Services, want)
	}
	if s.Env["SUPABASE_URL"] != "http://127.0.0.1:54321" || s.Env["SUPABASE_ANON_KEY"] != "eyJanon" || s.Env["SUPABASE_DB_URL"] == "" {
		t.Errorf("env = %v", s.Env)
	}
	if _, err := parseSupabaseStatus("supabase start is not running."); err == nil {
		t.Error("no JSON: want an error")
	}
	if _, err := parseSupabaseStatus(`{"DB_URL":"postgresql://p@127.0.0.1:54322/postgres"}`); err == nil || !strings.Contains(err.Error(), "API_URL") {
		t.Errorf("no API_URL: err = %v", err)
	}
}

func TestStartSupabaseWithoutCLI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := startSupabase(context.Background(), &serviceRunner{log: zerolog.Nop()}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "supabase CLI") {
		t.Errorf("err = %v, want one naming the missing CLI", err)
	}
}

// startSupabase drives the CLI (init once, start, status) and reports the
// images the start pulled, so they can go to the image cache. The CLI and
// docker are small fake programs here; the real stack needs a registry.
func TestStartSupabaseDrivesTheCLI(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	started := filepath.Join(t.TempDir(), "started")
	os.WriteFile(filepath.Join(bin, "supabase"), []byte(`#!/bin/sh
echo "$*" >> `+calls+`
case "$1" in
init) mkdir -p "$3/supabase" && touch "$3/supabase/config.toml" ;;
start) touch `+started+` ;;
status) echo 'Stopped services: []'; echo '{"API_URL":"http://127.0.0.1:54321","DB_URL":"postgresql://postgres:postgres@127.0.0.1:54322/postgres","ANON_KEY":"anon"}' ;;
esac
`), 0o755)
	// The fake docker lists one image before the start and two after.
	os.WriteFile(filepath.Join(bin, "docker"), []byte(`#!/bin/sh
echo "redis:7"
if [ -e `+started+` ]; then echo "public.ecr.aws/supabase/postgres:17"; echo "<none>:<none>"; fi
`), 0o755)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	r := &serviceRunner{log: zerolog.Nop(), docker: dockerCLI{bin: filepath.Join(bin, "docker"), log: zerolog.Nop()}}
	dir := t.TempDir()
	stack, pulled, err := startSupabase(context.Background(), r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if stack.Services["supabase_kong"] != "127.0.0.1:54321" || stack.Services["supabase_db"] != "127.0.0.1:54322" || stack.Env["SUPABASE_ANON_KEY"] != "anon" {
		t.Errorf("stack = %+v", stack)
	}
	if strings.Join(pulled, ",") != "public.ecr.aws/supabase/postgres:17" {
		t.Errorf("pulled = %v", pulled)
	}
	os.Remove(started)
	if _, _, err := startSupabase(context.Background(), r, dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(calls)
	want := "init --workdir " + dir + "\nstart --workdir " + dir + "\nstatus --workdir " + dir + " --output json\n" +
		"start --workdir " + dir + "\nstatus --workdir " + dir + " --output json\n"
	if string(b) != want {
		t.Errorf("CLI calls:\n%s\nwant (init only once):\n%s", b, want)
	}
}

func TestChildEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/root", "USER=root", envChild + "=1", "GH_SECRET=x", "SANDBOX_SERVICES_FILE=/old"}
	acct := &account{Name: "sandbox", Home: "/home/sandbox"}
	env := childEnv(base, acct, map[string]string{"SANDBOX_SERVICES_FILE": "/run/sandbox/services.json"})
	got := strings.Join(env, "\n")
	for _, want := range []string{"PATH=/usr/bin", "HOME=/home/sandbox", "USER=sandbox", "GH_SECRET=x", "SANDBOX_SERVICES_FILE=/run/sandbox/services.json"} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("env lacks %s:\n%s", want, got)
		}
	}
	for _, bad := range []string{"HOME=/root", "USER=root", envChild, "/old"} {
		if strings.Contains(got, bad) {
			t.Errorf("env keeps %s:\n%s", bad, got)
		}
	}
}

func TestAddHostsReplacesItsOwnLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(p, []byte("127.0.0.1\tlocalhost\n172.19.0.9\told "+hostsMarker+"\n"), 0o644)
	err := addHosts(p, dispatch.Services{"redis": "172.19.0.2:6379", "supabase_kong": "127.0.0.1:54321", "x": "172.19.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "127.0.0.1\tlocalhost\n172.19.0.2\tredis " + hostsMarker + "\n172.19.0.3\tx " + hostsMarker + "\n"
	if string(b) != want {
		t.Errorf("hosts =\n%s\nwant\n%s", b, want)
	}
}

func TestParseOptions(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	var stderr bytes.Buffer
	o, err := parseOptions([]string{"--", "sh", "-c", "true"}, env(nil), &stderr)
	if err != nil || strings.Join(o.command, " ") != "sh -c true" || o.user != "sandbox" || o.cacheDir != "/cache" {
		t.Errorf("options = %+v, %v", o, err)
	}
	if _, err := parseOptions(nil, env(nil), &stderr); err == nil || !strings.Contains(err.Error(), dispatch.EnvWorkOrder) {
		t.Errorf("no work order: err = %v", err)
	}
	if _, err := parseOptions(nil, env(map[string]string{dispatch.EnvWorkOrder: "/w", envStorageDriver: "zfs"}), &stderr); err == nil || !strings.Contains(err.Error(), envStorageDriver) {
		t.Errorf("bad driver: err = %v", err)
	}
	if _, err := parseOptions(nil, env(map[string]string{dispatch.EnvWorkOrder: "/w", envDockerdTimeout: "soon"}), &stderr); err == nil || !strings.Contains(err.Error(), envDockerdTimeout) {
		t.Errorf("bad timeout: err = %v", err)
	}
	o, err = parseOptions([]string{"--check"}, env(map[string]string{envDockerdTimeout: "5"}), &stderr)
	if err != nil || !o.check || o.dockerdTimeout != 5*time.Second {
		t.Errorf("check: %+v %v", o, err)
	}
}

// A sandbox whose start fails leaves a receipt saying why, and does not
// overwrite one the runner wrote.
func TestFallbackReceipt(t *testing.T) {
	out := t.TempDir()
	s := fallbackReceipt{log: zerolog.Nop(), started: time.Now(), order: &dispatch.WorkOrder{TaskID: "T-0000ABCD", Mode: dispatch.ModePlan, OutputDir: out}}
	if code := s.fail(dispatch.StatusFailed, errors.New("service db: not healthy"), nothingStarted); code != exitSetupFailed {
		t.Errorf("exit code = %d", code)
	}
	raw, err := os.ReadFile(filepath.Join(out, dispatch.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	r, err := dispatch.ParseResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != dispatch.StatusFailed || r.TaskID != "T-0000ABCD" || !strings.Contains(r.Error.Message, "service db: not healthy") {
		t.Errorf("receipt = %+v", r)
	}
	s.writeIfMissing(dispatch.StatusInterrupted, "later")
	r2, _ := os.ReadFile(filepath.Join(out, dispatch.ResultFile))
	if !bytes.Equal(raw, r2) {
		t.Error("an existing receipt was overwritten")
	}
}

// Without a daemon (task mode), the init supervises a command, as an
// unprivileged user when it is root, hands it the services file, and exits
// with its code.
func TestRunTaskModeSupervisesTheCommand(t *testing.T) {
	out := t.TempDir()
	// The command may run as nobody: it must reach the directories.
	os.Chmod(filepath.Dir(out), 0o755)
	os.Chmod(out, 0o777)
	order := filepath.Join(t.TempDir(), "wo.json")
	raw, _ := json.Marshal(dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-0000ABCD", Mode: dispatch.ModeTask, Attempt: 1,
		OutputDir: out, Config: sandboxcfg.MustResolve(sandboxcfg.Config{Mode: sandboxcfg.ModeTask})})
	os.WriteFile(order, raw, 0o644)
	runtime := t.TempDir()
	os.Chmod(runtime, 0o755)
	opts := options{workOrder: order, cacheDir: t.TempDir(), runtimeDir: runtime, user: "nobody",
		command: []string{"sh", "-c", `{ cat "$SANDBOX_SERVICES_FILE"; id -u; } > "` + out + `/svc"; exit 7`}}
	s := &sandbox{opts: opts, log: zerolog.Nop(), started: time.Now()}
	if code := s.run(context.Background()); code != 7 {
		t.Errorf("exit code = %d, want the command's 7", code)
	}
	b, err := os.ReadFile(filepath.Join(out, "svc"))
	if err != nil {
		t.Fatal(err)
	}
	wantUID := fmt.Sprint(os.Geteuid())
	if os.Geteuid() == 0 {
		a, err := lookupAccount("nobody")
		if err != nil {
			t.Skip(err)
		}
		wantUID = fmt.Sprint(a.UID)
	}
	if got := strings.Fields(string(b)); len(got) != 2 || got[0] != "{}" || got[1] != wantUID {
		t.Errorf("command saw services %q, ran as uid %q; want {} and %s", b, got, wantUID)
	}
	if _, err := os.Stat(filepath.Join(out, dispatch.ResultFile)); err == nil {
		t.Error("a command given after -- is not the runner: no fallback receipt expected")
	}
}

// Supabase's log collector would hold the daemon's socket: analytics is
// turned off in config.toml whatever the file said, and nothing else in it
// changes.
func TestAnalyticsOff(t *testing.T) {
	for in, want := range map[string]string{
		"[api]\nport = 54321\n\n[analytics]\nenabled = true\nport = 54327\n\n[db]\nport = 54322\n": "[api]\nport = 54321\n\n[analytics]\nenabled = false\nport = 54327\n\n[db]\nport = 54322\n",
		"[analytics]\nport = 54327\n[db]\n":  "[analytics]\nport = 54327\nenabled = false\n[db]\n",
		"[api]\nenabled = true\n":            "[api]\nenabled = true\n\n\n[analytics]\nenabled = false",
		"[analytics]\n  enabled=true # on\n": "[analytics]\nenabled = false\n",
	} {
		if got := analyticsOff(in); got != want {
			t.Errorf("analyticsOff(%q) = %q, want %q", in, got, want)
		}
	}
}

// A bind of a daemon socket, or of a directory above one, is what the
// init refuses to leave in any container of the sandbox.
func TestHoldsDaemonSocket(t *testing.T) {
	for src, want := range map[string]bool{
		"/var/run/docker.sock": true, "/run/docker.sock": true, "/var/run": true, "/run/": true, "/": true, "/var": false,
		"/run/containerd": true, "/run/containerd/containerd.sock": true, "/run/sandbox/docker.sock": false, "/workspace": false,
		"/var/run/../run/docker.sock": true, "/run/sandbox": false,
	} {
		if got := holdsDaemonSocket(src); got != want {
			t.Errorf("holdsDaemonSocket(%q) = %v, want %v", src, got, want)
		}
	}
}
