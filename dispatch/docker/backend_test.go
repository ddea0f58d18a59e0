package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// These tests need no engine: they cover what the backend decides (locks,
// files, the docker command line, state mapping). sandbox_test.go runs the
// real image.

func unitBackend(t *testing.T, mod func(*Options)) *Backend {
	t.Helper()
	o := Options{Image: "sandbox-bot/sandbox:test", DataDir: t.TempDir(), Logger: zerolog.Nop(), Docker: "true"}
	if mod != nil {
		mod(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		o    Options
		want string
	}{
		{Options{DataDir: "/tmp/x", Docker: "true"}, "SANDBOX_IMAGE"},
		{Options{Image: "i", Docker: "true"}, "SANDBOX_DATA_DIR"},
		{Options{Image: "i", DataDir: t.TempDir(), Isolation: "root", Docker: "true"}, `isolation "root"`},
		{Options{Image: "i", DataDir: t.TempDir(), Docker: "no-such-docker-cli"}, "no-such-docker-cli"},
	}
	for _, c := range cases {
		if _, err := New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

func TestNewCreatesPrivateDataDir(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, func(o *Options) {
		o.DataDir = filepath.Join(t.TempDir(), "data")
		o.CacheDir = filepath.Join(t.TempDir(), "cache")
	})
	for _, d := range []string{b.o.DataDir, filepath.Join(b.o.DataDir, "tasks"), filepath.Join(b.o.DataDir, "locks")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700 (task directories hold tokens)", d, st.Mode().Perm())
		}
	}
	if st, err := os.Stat(filepath.Join(b.o.CacheDir, seedImages)); err != nil || !st.IsDir() {
		t.Errorf("seed image cache: %v", err)
	}
}

func TestLockIsExclusivePerIssue(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, nil)
	ctx := context.Background()
	key := dispatch.LockKey("Acme/Calc", 7)
	if cur, err := b.Lock(ctx, key, "T-00000001"); err != nil || cur != "T-00000001" {
		t.Fatalf("first lock = %q, %v", cur, err)
	}
	if cur, err := b.Lock(ctx, key, "T-00000001"); err != nil || cur != "T-00000001" {
		t.Fatalf("re-lock by the holder = %q, %v", cur, err)
	}
	// Same issue, other spelling of the repo: GitHub names are case-insensitive.
	if cur, err := b.Lock(ctx, dispatch.LockKey("acme/calc", 7), "T-00000002"); !errors.Is(err, dispatch.ErrLocked) || cur != "T-00000001" {
		t.Fatalf("second holder = %q, %v; want T-00000001, ErrLocked", cur, err)
	}
	if _, err := b.Lock(ctx, dispatch.LockKey("acme/calc", 8), "T-00000002"); err != nil {
		t.Fatalf("another issue: %v", err)
	}
	if err := b.Unlock(ctx, key, "T-00000002"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := b.Lock(ctx, key, "T-00000003"); cur != "T-00000001" {
		t.Fatalf("unlock by a non-holder released the lock (now %q)", cur)
	}
	if err := b.Unlock(ctx, key, "T-00000001"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx, key, "T-00000001"); err != nil {
		t.Fatalf("unlocking a free lock: %v", err)
	}
	if cur, err := b.Lock(ctx, key, "T-00000003"); err != nil || cur != "T-00000003" {
		t.Fatalf("after unlock = %q, %v", cur, err)
	}
	names, _ := filepath.Glob(filepath.Join(b.o.DataDir, "locks", "*"))
	for _, n := range names {
		if strings.ContainsAny(filepath.Base(n), "/#") {
			t.Errorf("lock file name %q keeps / or #", n)
		}
	}
}

// Two replicas (two Backends on one data directory) racing for one issue:
// exactly one wins.
func TestLockRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[string]bool{}
	for i := 0; i < 16; i++ {
		b := unitBackend(t, func(o *Options) { o.DataDir = dir })
		holder := fmt.Sprintf("T-%08X", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cur, err := b.Lock(context.Background(), "o/r#1", holder)
			if err == nil {
				mu.Lock()
				winners[cur] = true
				mu.Unlock()
			} else if !errors.Is(err, dispatch.ErrLocked) || cur == "" {
				t.Errorf("loser got %q, %v", cur, err)
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
}

func testSpec(mode dispatch.Mode) dispatch.RunSpec {
	id := "T-0A1B2C3D"
	cfg := sandboxcfg.Config{Harness: "command", Command: "true", Resources: sandboxcfg.Resources{CPU: 1500, MemoryMB: 2048}}
	if mode == dispatch.ModeTask {
		cfg.Mode = sandboxcfg.ModeTask
	}
	o := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: id, Mode: mode, Attempt: 1,
		Repo: "acme/calc", Number: 7, TargetBranch: "agent/x", Plan: "p", Config: sandboxcfg.MustResolve(cfg), OutputDir: "/elsewhere"}
	if mode != dispatch.ModeTask {
		o.CloneURL = "https://github.com/acme/calc.git"
	}
	return dispatch.RunSpec{
		Meta:  dispatch.Meta{TaskID: id, Mode: mode, Repo: "acme/calc", Number: 7, InstallationID: 42, Attempt: 1, DeliveryID: "d-1"},
		Order: o, Token: "ghs_secret_token_value",
	}
}

func argsOf(t *testing.T, b *Backend, spec dispatch.RunSpec, isolation dispatch.Isolation) string {
	t.Helper()
	task := spec.Order.Mode == dispatch.ModeTask
	rec := record{Meta: spec.Meta, Container: containerName(spec.Meta.TaskID, spec.Meta.Mode), Isolation: isolation}
	args, err := b.runArgs(rec, spec.Order, b.TaskDir(spec.Meta.TaskID), task)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(args, " ")
}

func TestRunArgsPerProfile(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, func(o *Options) {
		o.CacheDir = t.TempDir()
		o.ExtraHosts = []string{"host.docker.internal:host-gateway"}
		o.Network = "sandboxes"
		o.StopGrace = 45 * time.Second
	})
	dir := b.TaskDir("T-0A1B2C3D")
	common := []string{
		"run --detach --name sandbox-T-0A1B2C3D-",
		"--label org.sandbox-bot.task=T-0A1B2C3D", "--label org.sandbox-bot.repo=acme/calc", "--label org.sandbox-bot.number=7",
		"--label org.sandbox-bot.data-dir=" + b.o.DataDir,
		"--env SANDBOX_WORK_ORDER=/sandbox/work-order.json",
		"--stop-timeout 45",
		"--mount type=bind,source=" + dir + "/work-order.json,target=/sandbox/work-order.json,readonly",
		"--mount type=bind,source=" + dir + "/secrets,target=/sandbox/secrets,readonly",
		"--mount type=bind,source=" + dir + "/out,target=/sandbox/out ",
		"--add-host host.docker.internal:host-gateway", "--network sandboxes",
		"--memory 2048m", "--cpus 1.500",
	}
	check := func(name, got string, want, not []string) {
		for _, w := range append(append([]string(nil), common...), want...) {
			if !strings.Contains(got, w) {
				t.Errorf("%s: args lack %q:\n%s", name, w, got)
			}
		}
		for _, n := range not {
			if strings.Contains(got, n) {
				t.Errorf("%s: args have %q:\n%s", name, n, got)
			}
		}
		if !strings.HasSuffix(got, " sandbox-bot/sandbox:test") {
			t.Errorf("%s: image is not last: %s", name, got)
		}
		if strings.Contains(got, "ghs_secret_token_value") || strings.Contains(got, "docker.sock") {
			t.Errorf("%s: a token or the host socket on the command line: %s", name, got)
		}
	}
	check("privileged", argsOf(t, b, testSpec(dispatch.ModeExecute), dispatch.IsolationPrivileged),
		[]string{"--privileged", "target=/var/lib/docker", "target=/cache/images"},
		[]string{"--cap-add", "--user"})
	caps := []string{"--cap-add ALL --cap-drop SYS_RESOURCE", "seccomp=unconfined", "apparmor=unconfined", "target=/var/lib/docker"}
	check("caps", argsOf(t, b, testSpec(dispatch.ModePlan), dispatch.IsolationCaps), caps, []string{"--privileged"})
	check("task", argsOf(t, b, testSpec(dispatch.ModeTask), ""),
		[]string{"--user 0:0", "--cap-drop ALL --cap-add NET_ADMIN --cap-add NET_RAW --cap-add SETUID --cap-add SETGID --cap-add SETPCAP --cap-add KILL",
			"no-new-privileges", dispatch.EnvTaskFence + "=1000:1000", "target=/cache/npm"},
		[]string{"--privileged", "--cap-add ALL", "SYS_ADMIN", "/var/lib/docker", "/cache/images", "--runtime"})
	// gvisor: the caps grants, towards gVisor's kernel; the host's
	// /dev/fuse and the sysctl mean nothing there.
	check("gvisor", argsOf(t, b, testSpec(dispatch.ModeExecute), dispatch.IsolationGVisor),
		append([]string{"--runtime runsc"}, caps...), []string{"--privileged", "/dev/fuse", "--sysctl"})
	// Every run of the profile is behind gVisor, task mode (and previews)
	// with the task's own flags.
	check("gvisor task", argsOf(t, b, testSpec(dispatch.ModeTask), dispatch.IsolationGVisor),
		[]string{"--runtime runsc", "--user 0:0", "--cap-drop ALL --cap-add NET_ADMIN", "no-new-privileges", dispatch.EnvTaskFence + "=1000:1000"},
		[]string{"--privileged", "--cap-add ALL", "/var/lib/docker", "seccomp=unconfined"})
}

func TestWriteTaskDir(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, func(o *Options) { o.Env = map[string]string{"HTTPS_PROXY": "http://proxy:3128"} })
	spec := testSpec(dispatch.ModeExecute)
	order := spec.Order
	order.OutputDir, order.TokenFile = dispatch.OutputDir, dispatch.TokenPath
	dir := b.TaskDir(spec.Meta.TaskID)
	if err := b.writeTaskDir(dir, order, spec.Token, false); err != nil {
		t.Fatal(err)
	}
	var got dispatch.WorkOrder
	raw, _ := os.ReadFile(filepath.Join(dir, "work-order.json"))
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.OutputDir != dispatch.OutputDir || got.TokenFile != dispatch.TokenPath || got.TaskID != spec.Meta.TaskID {
		t.Errorf("work order = %+v", got)
	}
	if strings.Contains(string(raw), spec.Token) {
		t.Error("the token is in the work order")
	}
	tok, err := os.ReadFile(filepath.Join(dir, "secrets", "token"))
	if err != nil || string(tok) != spec.Token {
		t.Fatalf("token file = %q, %v", tok, err)
	}
	st, _ := os.Stat(filepath.Join(dir, "secrets", "token"))
	if os.Geteuid() == 0 && st.Mode().Perm() != 0o600 {
		t.Errorf("token mode %v, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("task dir mode %v, want 0700", st.Mode().Perm())
	}
	for _, d := range []string{"out", "docker"} {
		if st, err := os.Stat(filepath.Join(dir, d)); err != nil || !st.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	if string(env) != "HTTPS_PROXY=http://proxy:3128\n" {
		t.Errorf("env file = %q", env)
	}

	// A refresh replaces the file by rename, so the directory bind shows
	// the new token to the sandbox and a reader never sees half of one.
	before, _ := os.Stat(filepath.Join(dir, "secrets", "token"))
	if err := b.RefreshToken(context.Background(), spec.Meta.TaskID, "ghs_new"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, "secrets", "token"))
	if tok, _ := os.ReadFile(filepath.Join(dir, "secrets", "token")); string(tok) != "ghs_new" {
		t.Errorf("refreshed token = %q", tok)
	}
	if os.SameFile(before, after) {
		t.Error("token rewritten in place; a rename is needed")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "secrets", ".token-*")); len(left) > 0 {
		t.Errorf("temporary token files left: %v", left)
	}
	if err := b.RefreshToken(context.Background(), "T-FFFFFFFF", "x"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("refresh of an unknown task = %v, want ErrNotFound", err)
	}
	// A restarted bot reads back the token the run holds, to revoke it.
	if tok, err := b.CurrentToken(context.Background(), spec.Meta.TaskID); err != nil || tok != "ghs_new" {
		t.Errorf("CurrentToken = %q, %v", tok, err)
	}
	if _, err := b.CurrentToken(context.Background(), "T-FFFFFFFF"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("CurrentToken of an unknown task = %v, want ErrNotFound", err)
	}
}

func TestSubmitRejectsMismatchedSpec(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, nil)
	spec := testSpec(dispatch.ModeExecute)
	spec.Meta.TaskID = "T-XYZ"
	if _, err := b.Submit(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "T-XYZ") {
		t.Errorf("bad task id: %v", err)
	}
	spec = testSpec(dispatch.ModeExecute)
	spec.Order.Mode = dispatch.ModePlan
	if _, err := b.Submit(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "work order is for") {
		t.Errorf("mode mismatch: %v", err)
	}
	spec = testSpec(dispatch.ModeExecute)
	spec.Isolation = "root"
	if _, err := b.Submit(context.Background(), spec); err == nil || !strings.Contains(err.Error(), `isolation "root"`) {
		t.Errorf("bad isolation: %v", err)
	}
}

func TestStateMapping(t *testing.T) {
	t.Parallel()
	for engine, want := range map[string]dispatch.State{
		"created": dispatch.StatePending, "running": dispatch.StateRunning, "paused": dispatch.StateRunning,
		"restarting": dispatch.StateRunning, "exited": dispatch.StateComplete, "dead": dispatch.StateLost,
	} {
		if got := state(engine); got != want {
			t.Errorf("state(%s) = %s, want %s", engine, got, want)
		}
	}
	m := metaFromLabels(map[string]string{labelTask: "T-0A1B2C3D", labelMode: "plan", labelRepo: "o/r", labelNumber: "12", labelAttempt: "2", labelInstallation: "99", labelDelivery: "d"})
	if m != (dispatch.Meta{TaskID: "T-0A1B2C3D", Mode: dispatch.ModePlan, Repo: "o/r", Number: 12, Attempt: 2, InstallationID: 99, DeliveryID: "d"}) {
		t.Errorf("meta from labels = %+v", m)
	}
}

func TestOrphanTaskDirIsPendingThenLost(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, nil)
	fresh := &record{Meta: dispatch.Meta{TaskID: "T-00000001"}, SubmittedAt: time.Now()}
	old := &record{Meta: dispatch.Meta{TaskID: "T-00000002"}, SubmittedAt: time.Now().Add(-2 * orphanGrace)}
	if st := b.orphan(fresh); st.State != dispatch.StatePending {
		t.Errorf("fresh orphan = %s, want pending (Submit writes the directory before the container)", st.State)
	}
	if st := b.orphan(old); st.State != dispatch.StateLost {
		t.Errorf("old orphan = %s, want lost", st.State)
	}
}

func TestScanLinesSplitsTimestamps(t *testing.T) {
	t.Parallel()
	in := "2026-11-21T21:22:00.123456789Z {\"event\":\"progress\",\"stage\":\"clone\"}\n" +
		"2026-11-21T21:22:01Z plain line\n" +
		"Error: No such container: x\n"
	var got []string
	scanLines(strings.NewReader(in), func(ts time.Time, line []byte) {
		got = append(got, fmt.Sprintf("%d|%s", ts.Nanosecond(), line))
	})
	want := []string{"123456789|{\"event\":\"progress\",\"stage\":\"clone\"}", "0|plain line", "0|Error: No such container: x"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestResultErrors(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, nil)
	if _, err := b.Result(context.Background(), "T-00000001"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("no task dir: %v", err)
	}
	os.MkdirAll(b.OutputDir("T-00000001"), 0o755)
	if _, err := b.Result(context.Background(), "T-00000001"); !errors.Is(err, dispatch.ErrNoResult) {
		t.Errorf("no result.json: %v", err)
	}
	if err := dispatch.WriteResult(b.OutputDir("T-00000001"), &dispatch.Result{TaskID: "T-00000001", Status: dispatch.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	r, err := b.Result(context.Background(), "T-00000001")
	if err != nil || r.Status != dispatch.StatusCompleted {
		t.Errorf("result = %+v, %v", r, err)
	}
}

// The operator's ceilings reach `docker run`: memory and CPU for a work
// order that asks for nothing, the pids limit always; a work order's own
// resources (already checked against the ceilings by the bot) win.
func TestRunArgsCeilings(t *testing.T) {
	t.Parallel()
	b := unitBackend(t, func(o *Options) { o.MemoryMB, o.CPU, o.PidsLimit = 8192, 4000, 4096 })
	for _, mode := range []dispatch.Mode{dispatch.ModeExecute, dispatch.ModeTask} {
		bare := testSpec(mode)
		bare.Order.Config.Resources = sandboxcfg.Resources{}
		got := argsOf(t, b, bare, dispatch.IsolationCaps)
		for _, w := range []string{"--memory 8192m", "--cpus 4.000", "--pids-limit 4096"} {
			if !strings.Contains(got, w) {
				t.Errorf("%s without resources: args lack %q:\n%s", mode, w, got)
			}
		}
		got = argsOf(t, b, testSpec(mode), dispatch.IsolationCaps)
		for _, w := range []string{"--memory 2048m", "--cpus 1.500", "--pids-limit 4096"} {
			if !strings.Contains(got, w) {
				t.Errorf("%s with resources: args lack %q:\n%s", mode, w, got)
			}
		}
	}
	if got := argsOf(t, unitBackend(t, nil), testSpec(dispatch.ModeExecute), dispatch.IsolationCaps); strings.Contains(got, "--pids-limit") {
		t.Errorf("no PidsLimit configured: args must not carry one:\n%s", got)
	}
}

func TestDefaultCPUFitsTheHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ configured, host, want int }{
		{4000, 2, 2000}, {4000, 8, 4000}, {4000, 0, 4000}, {1500, 2, 1500},
	} {
		if got := defaultCPU(c.configured, c.host); got != c.want {
			t.Errorf("defaultCPU(%d, %d host CPUs) = %d, want %d", c.configured, c.host, got, c.want)
		}
	}
}
