package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPreviewProxy: a GET of the dev server's page through the bot
// (sign-in cookie, access check, proxy, the init's socket forwarder)
// beside the same GET straight to the dev server, alternating; it prints
// p50 and p99 of both and the p99 the proxy adds (goal ≤ 5 ms).
func BenchmarkPreviewProxy(b *testing.B) {
	f, dev, task := startPreview(b)
	alice := f.signedInClient("alice")
	direct := &http.Client{}
	get := func(c *http.Client, url string) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	proxied, floor := f.http.URL+"/runs/"+task+"/preview/", fmt.Sprintf("http://127.0.0.1:%d/", dev.port)
	get(alice, proxied) // warm connections both ways
	get(direct, floor)
	var through, straight []time.Duration
	b.ResetTimer()
	for range b.N {
		through = append(through, get(alice, proxied))
		straight = append(straight, get(direct, floor))
	}
	b.StopTimer()
	pct := percentileMs
	b.ReportMetric(pct(through, 0.5), "proxy-p50-ms")
	b.ReportMetric(pct(through, 0.99), "proxy-p99-ms")
	b.ReportMetric(pct(straight, 0.5), "direct-p50-ms")
	b.ReportMetric(pct(straight, 0.99), "direct-p99-ms")
	b.ReportMetric(pct(through, 0.99)-pct(straight, 0.99), "added-p99-ms")
	b.Logf("load average at the end: %s (the preview's bounds on: %+v)", loadAverage(), defaultPreviewBounds)
}

// BenchmarkHealthzDuringPreviewFlood: the bot's /healthz while a page
// holding a leaked preview ticket floods the preview from another process,
// as a remote client would (200 loops of page requests and 100 of upgrade
// requests the dev server never answers: TestPreviewFloodClient), beside
// /healthz with no flood, in alternating rounds of 100 probes 10 ms apart:
// p99 of both and their ratio (goal ≤ 1.5), each round's figures logged
// beside the load average taken with them. The
// dev server is in this process (in a sandbox it is not), so the flood's
// served pages cost this process their serving too.
func BenchmarkHealthzDuringPreviewFlood(b *testing.B) {
	f, _, task := startPreview(b)
	alice := f.signedInClient("alice")
	resp, err := alice.Get(f.http.URL + "/runs/" + task + "/preview/")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	page := resp.Request.URL.String()
	health := &http.Client{Timeout: 10 * time.Second}
	probes := func() (d []time.Duration) {
		for range 100 {
			start := time.Now()
			r, err := health.Get(f.http.URL + "/healthz")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			d = append(d, time.Since(start))
			time.Sleep(10 * time.Millisecond)
		}
		return d
	}
	var idle, flooded []time.Duration
	var rounds []string
	var floodCPU, floodWall time.Duration
	b.ResetTimer()
	for i := range b.N {
		quiet := probes()
		idle = append(idle, quiet...)
		idleLoad := loadAverage()
		cpu0, wall0 := processCPU(), time.Now()
		flood := exec.Command(os.Args[0], "-test.run=^TestPreviewFloodClient$")
		flood.Env = append(os.Environ(), floodURL+"="+page)
		if err := flood.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the flood under way before the first probe
		loud := probes()
		flooded = append(flooded, loud...)
		_ = flood.Process.Kill()
		_ = flood.Wait()
		cpu, wall := processCPU()-cpu0, time.Since(wall0)
		floodCPU += cpu
		floodWall += wall
		rounds = append(rounds, fmt.Sprintf("round %d: idle p99 %.2f ms (load %s) | flood p99 %.2f ms (load %s), bot %.2f cores",
			i+1, percentileMs(quiet, 0.99), idleLoad, percentileMs(loud, 0.99), loadAverage(), cpu.Seconds()/wall.Seconds()))
	}
	b.StopTimer()
	pct := percentileMs
	b.ReportMetric(pct(idle, 0.99), "idle-p99-ms")
	b.ReportMetric(pct(flooded, 0.99), "flood-p99-ms")
	b.ReportMetric(pct(flooded, 0.99)/pct(idle, 0.99), "x-idle")
	// The bot's own CPU while flooded (the flood's client is another
	// process): what the flood costs the bot, whatever the machine's load.
	b.ReportMetric(floodCPU.Seconds()/floodWall.Seconds(), "bot-cores-flooded")
	b.Logf("alternating rounds, each figure beside the load average when it was taken (bounds %+v):\n%s",
		defaultPreviewBounds, strings.Join(rounds, "\n"))
}

// floodURL names the page TestPreviewFloodClient floods.
const floodURL = "SANDBOX_PREVIEW_FLOOD_URL"

// TestPreviewFloodClient is BenchmarkHealthzDuringPreviewFlood's flood, in
// a process of its own; without the page to flood it does nothing.
func TestPreviewFloodClient(t *testing.T) {
	page := os.Getenv(floodURL)
	if page == "" {
		t.Skip("run by BenchmarkHealthzDuringPreviewFlood")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
				if i%3 == 0 {
					req, _ = http.NewRequestWithContext(ctx, http.MethodGet, page+"hang", nil)
					req.Header.Set("Connection", "Upgrade")
					req.Header.Set("Upgrade", "websocket")
				}
				if r, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
}

// loadAverage is the machine's 1, 5 and 15 minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// percentileMs is the p-th percentile of d in milliseconds.
func percentileMs(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
