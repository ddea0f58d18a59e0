package docker_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkSandboxReady measures sandbox ready time, container start to
// runner started with one healthy service (inner dockerd up, the service
// image loaded from the image cache, started and probed), beside the floor
// of a bare `docker run` of the same image running `true`, in the same
// run. The goal is at most 1 s of overhead with a warm image:
//
//	go test -run '^$' -bench SandboxReady -benchtime 1x ./dispatch/docker/
//
// Each timed start's step timings (the init's "steps" field:
// name@start+took in milliseconds from the init's start) are logged
// beside the figures, so a slow start shows where its time went.
//
// The sub-benchmark no-services is a run without services: the init holds
// the inner daemon's socket and starts no daemon until something uses it.
func BenchmarkSandboxReady(b *testing.B) {
	img := testenv.SandboxImage(b)
	svc := dockertest.ServiceImage(b)
	cache := b.TempDir()
	dockertest.CacheImage(b, filepath.Join(cache, "images"), svc)
	b.Run("one-service", func(b *testing.B) {
		sandboxReady(b, img, cache, map[string]sandboxcfg.Service{"web": {Image: svc, Ports: []int{8080}}})
	})
	b.Run("no-services", func(b *testing.B) { sandboxReady(b, img, cache, nil) })
	// The gvisor profile beside caps, alternating in each iteration (which
	// goes first alternates too), with the load average of each.
	b.Run("gvisor-vs-caps/one-service", func(b *testing.B) {
		testenv.Runsc(b)
		gvisorVsCapsReady(b, img, cache, map[string]sandboxcfg.Service{"web": {Image: svc, Ports: []int{8080}}})
	})
	b.Run("gvisor-vs-caps/no-services", func(b *testing.B) {
		testenv.Runsc(b)
		gvisorVsCapsReady(b, img, cache, nil)
	})
}

func gvisorVsCapsReady(b *testing.B, img, cache string, services map[string]sandboxcfg.Service) {
	orderPath := readyOrder(b, services)
	profiles := []dispatch.Isolation{dispatch.IsolationCaps, dispatch.IsolationGVisor}
	for _, iso := range profiles { // warm-up
		_, _, _ = ready(b, iso, img, orderPath, cache)
	}
	sums := map[dispatch.Isolation]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 1 {
			profiles[0], profiles[1] = profiles[1], profiles[0]
		}
		for _, iso := range profiles {
			r, init, steps := ready(b, iso, img, orderPath, cache)
			sums[iso] += r
			b.Logf("%s: ready %s, init %s (load average %s); steps: %s", iso, r.Round(time.Millisecond), init.Round(time.Millisecond), testenv.LoadAverage(), steps)
		}
	}
	b.StopTimer()
	n := time.Duration(b.N)
	caps, gvisor := sums[dispatch.IsolationCaps]/n, sums[dispatch.IsolationGVisor]/n
	b.ReportMetric(float64(caps.Milliseconds()), "caps_ms")
	b.ReportMetric(float64(gvisor.Milliseconds()), "gvisor_ms")
	b.ReportMetric(float64(gvisor)/float64(caps), "x_caps")
}

// readyOrder writes the work order of a plan run with services.
func readyOrder(b *testing.B, services map[string]sandboxcfg.Service) string {
	order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-BE0C0001", Mode: dispatch.ModePlan, Attempt: 1,
		CloneURL: "http://host.docker.internal:1/x.git", OutputDir: "/sandbox/out",
		Config: sandboxcfg.MustResolve(sandboxcfg.Config{Services: services})}
	raw, _ := json.Marshal(order)
	orderPath := filepath.Join(b.TempDir(), "work-order.json")
	if err := os.WriteFile(orderPath, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	return orderPath
}

func sandboxReady(b *testing.B, img, cache string, services map[string]sandboxcfg.Service) {
	orderPath := readyOrder(b, services)

	// One untimed run of each warms the engine's and the kernel's caches.
	bare(b, img)
	_, _, _ = ready(b, dispatch.IsolationCaps, img, orderPath, cache)

	var bareSum, readySum, initSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		floor := bare(b, img)
		bareSum += floor
		r, init, steps := ready(b, dispatch.IsolationCaps, img, orderPath, cache)
		b.Logf("bare %s, ready %s (overhead %s), init %s; steps: %s", floor.Round(time.Millisecond), r.Round(time.Millisecond),
			(r - floor).Round(time.Millisecond), init.Round(time.Millisecond), steps)
		readySum += r
		initSum += init
	}
	b.StopTimer()
	n := time.Duration(b.N)
	bareAvg, readyAvg, initAvg := bareSum/n, readySum/n, initSum/n
	b.ReportMetric(float64(bareAvg.Milliseconds()), "bare_ms")
	b.ReportMetric(float64(readyAvg.Milliseconds()), "ready_ms")
	b.ReportMetric(float64(initAvg.Milliseconds()), "init_ms")
	b.ReportMetric(float64((readyAvg - bareAvg).Milliseconds()), "overhead_ms")
	b.ReportMetric(float64(readyAvg)/float64(bareAvg), "ratio")
}

// bare times `docker run --rm IMAGE true`, start to exit.
func bare(b *testing.B, img string) time.Duration {
	start := time.Now()
	if out, err := exec.Command("docker", "run", "--rm", "--entrypoint", "true", img).CombinedOutput(); err != nil {
		b.Fatalf("bare docker run: %v: %s", err, out)
	}
	return time.Since(start)
}

// ready times a sandbox of profile iso (the docker backend's flags) from
// `docker run` until its init logs "runner started", and returns that,
// the init's own count (from its start as PID 1) and its step timings.
func ready(b *testing.B, iso dispatch.Isolation, img, order, cache string) (time.Duration, time.Duration, string) {
	args := append([]string{"run", "--rm"}, docker.IsolationArgs(iso)...)
	args = append(args,
		"--mount", "type=bind,source="+b.TempDir()+",target=/var/lib/docker",
		"--mount", "type=bind,source="+order+",target=/sandbox/work-order.json,readonly",
		"--mount", "type=bind,source="+b.TempDir()+",target=/sandbox/out",
		"--mount", "type=bind,source="+cache+",target=/cache",
		img, "--", "true")
	cmd := exec.Command("docker", args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var took, init time.Duration
	var steps string
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if took == 0 && strings.Contains(line, `"message":"runner started"`) {
			took = time.Since(start)
			var ev struct {
				ReadySeconds float64 `json:"ready_seconds"`
				Steps        string  `json:"steps"`
			}
			json.Unmarshal([]byte(line), &ev)
			init = time.Duration(ev.ReadySeconds * float64(time.Second))
			steps = ev.Steps
		}
	}
	if err := cmd.Wait(); err != nil || took == 0 {
		b.Fatalf("sandbox: %v; never ready:\n%s", err, strings.Join(lines, "\n"))
	}
	return took, init, steps
}
