package gateway_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
)

// BenchmarkGatewayLatency measures what the gateway adds to one model
// request: a streamed chat completion from the scripted server, read to its
// end, directly and through the gateway, alternating so both see the same
// machine load. It reports both p50 and p99 and the p99 difference (the
// target is at most 5 ms). Each b.N iteration is one pair of requests.
func BenchmarkGatewayLatency(b *testing.B) {
	srv, err := modeltest.New("127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cfg := dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{{Name: "scripted", BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: "sk-bench"}}}
	g, err := gateway.New(cfg, gateway.Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw, err := gateway.Serve(ctx, g, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// No tools: the scripted server answers these as side requests, a
	// short stream that consumes no turn of its (empty) script.
	body := `{"model":"scripted-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	request := func(url string) time.Duration {
		start := time.Now()
		resp, err := client.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatalf("%s: status %d, %d bytes", url, resp.StatusCode, n)
		}
		return time.Since(start)
	}
	direct, via := srv.URL, gw.URL+"/scripted"
	for range 20 { // warm connections on both paths
		request(direct)
		request(via)
	}
	var d, v []time.Duration
	b.ResetTimer()
	for range b.N {
		d = append(d, request(direct))
		v = append(v, request(via))
	}
	b.StopTimer()
	dp50, dp99 := percentile(d, 50), percentile(d, 99)
	vp50, vp99 := percentile(v, 50), percentile(v, 99)
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	b.ReportMetric(ms(dp50), "direct-p50-ms")
	b.ReportMetric(ms(dp99), "direct-p99-ms")
	b.ReportMetric(ms(vp50), "gateway-p50-ms")
	b.ReportMetric(ms(vp99), "gateway-p99-ms")
	b.ReportMetric(ms(vp99-dp99), "added-p99-ms")
	b.ReportMetric(0, "ns/op")
}

func percentile(xs []time.Duration, p int) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
