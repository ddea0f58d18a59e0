package nomad_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// TestMain doubles as the fake agent of BenchmarkWatch1000: with
// NOMADTEST_SERVE set, the test binary serves a fake Nomad in its own
// process, so the benchmark's memory figures are the bot's alone.
func TestMain(m *testing.M) {
	if os.Getenv("NOMADTEST_SERVE") != "" {
		os.Exit(serveFake())
	}
	os.Exit(m.Run())
}

// serveFake runs a fake agent whose sandboxes print a progress line every
// second until POST /release on the control address, then leave their
// receipt. It prints "<agent URL> <control URL>" and exits when stdin closes.
func serveFake() int {
	release := make(chan struct{})
	var once sync.Once
	driver := nomadtest.DriverFunc(func(ctx context.Context, t *nomadtest.Task) (int, error) {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for step := 1; ; step++ {
			line, _ := json.Marshal(dispatch.Progress{Event: "progress", TaskID: t.Job.Meta[nomad.MetaTaskID], Stage: "agent", Message: "working", Step: step})
			fmt.Fprintf(t.Stdout, "%s\n", line)
			select {
			case <-ctx.Done():
				return 143, nil
			case <-release:
				return 0, dispatch.WriteResult(filepath.Join(t.AllocDir, "data"), &dispatch.Result{TaskID: t.Job.Meta[nomad.MetaTaskID], Mode: dispatch.Mode(t.Job.Meta[nomad.MetaMode]), Status: dispatch.StatusCompleted})
			case <-tick.C:
			}
		}
	})
	fake, err := nomadtest.New(nomadtest.Options{Driver: driver, EventBuffer: 100000, Namespaces: []string{nomad.DefaultNamespace}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fake.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(release) })
	}))
	fmt.Printf("%s http://%s\n", fake.URL, ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// BenchmarkSubmit measures submission latency against the fake on loopback
// (look-up, token Variable, create-only registration: three round trips),
// next to a floor of one bare HTTP round trip to the same agent.
func BenchmarkSubmit(b *testing.B) {
	fake, err := nomadtest.New(nomadtest.Options{NoPlacement: true, Namespaces: []string{nomad.DefaultNamespace}})
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	c, _ := fake.Client("")
	be, err := nomad.New(nomad.Options{Client: c, Image: testImage, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := context.Background()

	// The floor is one bare round trip to the same agent, taken next to
	// each submission so both see the same load on a shared machine.
	hc := &http.Client{}
	roundTrip := func() time.Duration {
		start := time.Now()
		resp, err := hc.Get(fake.URL + "/v1/jobs?prefix=floor")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	floor := make([]time.Duration, 0, b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := spec(dispatch.ModeExecute, "bench-"+strconv.Itoa(i))
		b.StopTimer()
		floor = append(floor, roundTrip())
		b.StartTimer()
		start := time.Now()
		if ok, err := be.Submit(ctx, s); err != nil || !ok {
			b.Fatalf("Submit = %v, %v", ok, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	f50, f99 := percentile(floor, 50), percentile(floor, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(f99), "floor-p99-ms")
	b.ReportMetric(float64(p50)/float64(f50), "p50/floor")
	b.ReportMetric(float64(p99)/float64(f99), "p99/floor")
	b.Logf("submit p50 %v p99 %v over %d; floor (one round trip) p50 %v p99 %v; goal p99 <= 20ms", p50, p99, len(lat), f50, f99)
}

// BenchmarkWatch1000 starts 1,000 runs on a fake agent in another process
// and waits on all of them with progress following, then measures the bot:
// resident memory, Go heap and goroutines, against the floor of the same
// process before it watched anything.
func BenchmarkWatch1000(b *testing.B) {
	if b.N > 1 {
		b.Skip("a one-shot measurement: run with -bench Watch1000 -benchtime 1x")
	}
	const runs = 1000
	url, control := startFakeProcess(b)
	cfgClient, err := (&nomadtest.Server{URL: url}).Client("")
	if err != nil {
		b.Fatal(err)
	}
	be, err := nomad.New(nomad.Options{Client: cfgClient, Image: testImage, Logger: zerolog.Nop(), LogDrain: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	runtime.GC()
	floorRSS, floorHeap, floorG := rssBytes(), heapInuse(), runtime.NumGoroutine()

	// Like the bot: each run is waited on as soon as it is submitted.
	var withProgress atomic.Int32
	states := make(chan dispatch.State, runs)
	submit := make(chan dispatch.RunSpec)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range submit {
				if _, err := be.Submit(ctx, s); err != nil {
					b.Error(err)
				}
				go func() {
					seen := false
					st, err := be.Wait(ctx, s.Order.TaskID, func(p dispatch.Progress) {
						if !seen && p.Step >= 2 {
							seen = true
							withProgress.Add(1)
						}
					})
					if err != nil {
						b.Error(err)
					}
					states <- st.State
				}()
			}
		}()
	}
	for i := 0; i < runs; i++ {
		submit <- spec(dispatch.ModeExecute, "watch-"+strconv.Itoa(i))
	}
	close(submit)
	wg.Wait()
	for withProgress.Load() < runs {
		if ctx.Err() != nil {
			b.Fatalf("only %d of %d runs reported progress", withProgress.Load(), runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	rss, heap, g := rssBytes(), heapInuse(), runtime.NumGoroutine()
	if p := os.Getenv("NOMAD_BENCH_HEAPPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}

	if _, err := http.Post(control+"/release", "text/plain", nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < runs; i++ {
		if st := <-states; st != dispatch.StateComplete {
			b.Fatalf("run ended %s", st)
		}
	}
	mb := func(n uint64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mb(rss), "rss-MB")
	b.ReportMetric(mb(heap), "heap-MB")
	b.ReportMetric(float64(g), "goroutines")
	b.ReportMetric(float64(rss-floorRSS)/runs/1024, "rss-KB/run")
	b.ReportMetric(float64(rss)/float64(floorRSS), "rss/floor")
	b.Logf("watching %d runs: RSS %.1f MB (floor %.1f MB), heap in use %.1f MB (floor %.1f MB), %d goroutines (floor %d), one event stream; goal RSS <= 100 MB",
		runs, mb(rss), mb(floorRSS), mb(heap), mb(floorHeap), g, floorG)
}

func startFakeProcess(b *testing.B) (url, control string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NOMADTEST_SERVE=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("fake agent process: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		b.Fatalf("fake agent process said %q", line)
	}
	return f[0], f[1]
}

func rssBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseUint(strings.Fields(l)[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
