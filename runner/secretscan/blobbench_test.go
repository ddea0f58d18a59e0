package secretscan_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/secretscan"
)

// The memory one large blob costs the scan, beside the floor of reading
// the same blob out of git to nowhere, in the same run:
//
//	go test -run '^$' -bench SecretScanLargeBlob -benchtime 3x ./runner/secretscan/
//
// The blob is 256 MiB of random bytes (binary to git) with a key in it.
// Each iteration streams `git cat-file blob` through ScanBlob, and then the
// same command into io.Discard, alternating; a sampler reads the heap's
// live objects every millisecond. Before issue 29 the runner read such a
// blob whole (its size, in memory) before the binary test threw it away.
func BenchmarkSecretScanLargeBlob(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	gitB(b, dir, "init", "-q", "-b", "main")
	f, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size-64); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(f, "\x00aws_key=%s\x00", awsKey)
	f.Close()
	gitB(b, dir, "add", "-A")
	gitB(b, dir, "commit", "-q", "-m", "disk image")
	s, err := secretscan.New(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	blob := func(read func(io.Reader) error) { gitStream(b, dir, nil, read, "cat-file", "blob", "HEAD:disk.img") }
	var scanT, floorT []time.Duration
	var scanPeak, floorPeak uint64
	var st secretscan.BlobScan
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		peak := heapPeak()
		t0 := time.Now()
		blob(func(r io.Reader) error {
			_, st, err = s.ScanBlob(context.Background(), "c", "disk.img", r)
			return err
		})
		scanT = append(scanT, time.Since(t0))
		scanPeak = max(scanPeak, peak())
		runtime.GC()
		peak = heapPeak()
		t0 = time.Now()
		blob(func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
		floorT = append(floorT, time.Since(t0))
		floorPeak = max(floorPeak, peak())
	}
	b.StopTimer()
	if !st.Cut || !st.Binary {
		b.Fatalf("blob scan %+v: want a binary blob cut at the bound", st)
	}
	b.ReportMetric(float64(size)/(1<<20), "blob-MiB")
	b.ReportMetric(float64(secretscan.MaxBlobBytes)/(1<<20), "scanned-MiB")
	b.ReportMetric(float64(scanPeak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(floorPeak)/(1<<20), "floor-peak-heap-MiB")
	b.ReportMetric(float64(median(scanT).Microseconds())/1000, "scan-ms")
	b.ReportMetric(float64(median(floorT).Microseconds())/1000, "floor-cat-file-ms")
	b.Logf("load average: %s", loadAverage())
}

// heapPeak samples the heap's live objects every millisecond until the
// function it returns is called, which gives the largest sample.
func heapPeak() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak.Load()
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return string(b[:min(len(b), 14)])
}
