package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkBrowserSnapshot measures the agent's cheapest look at a page:
// take_snapshot through chrome-devtools-mcp, started with the command line
// the runner gives the agent, on a page of a dev server that is up,
// beside a plain HTTP GET of the same page (the floor), alternating so
// load on the machine hits both alike. Reported: the median of each, the
// ratio, and the one-off time from starting the MCP server to the first
// snapshot (Chromium's launch included). Goal: snapshot-ms <= 300.
func BenchmarkBrowserSnapshot(b *testing.B) {
	chromium := testenv.Chromium(b)
	bin := runtest.BrowserMCP(b)
	page := `<!doctype html><html><head><title>Calc</title></head><body><h1>Calc</h1><button>Add</button><ul>` +
		strings.Repeat("<li><a href=\"#\">item</a></li>", 50) + `</ul></body></html>`
	dev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) }))
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	args := browserCommand(bin, chromium, b.TempDir())
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(cmd.Environ(), "CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS=1", "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS=1")
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-bot-bench", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connect to chrome-devtools-mcp: %v", err)
	}
	defer session.Close()
	call := func(name string, args map[string]any) string {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text.WriteString(t.Text)
			}
		}
		if res.IsError {
			b.Fatalf("%s: %s", name, text.String())
		}
		return text.String()
	}
	call("navigate_page", map[string]any{"type": "url", "url": dev.URL})
	if s := call("take_snapshot", map[string]any{}); !strings.Contains(s, `button "Add"`) {
		b.Fatalf("the snapshot does not show the page:\n%s", s)
	}
	first := time.Since(start)

	var gets, snaps []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := http.Get(dev.URL)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t1 := time.Now()
		call("take_snapshot", map[string]any{})
		t2 := time.Now()
		gets, snaps = append(gets, t1.Sub(t0)), append(snaps, t2.Sub(t1))
	}
	b.StopTimer()
	get, snap := median(gets), median(snaps)
	b.ReportMetric(float64(snap.Microseconds())/1000, "snapshot-ms")
	b.ReportMetric(float64(get.Microseconds())/1000, "floor-get-ms")
	b.ReportMetric(float64(snap)/float64(max(get, time.Microsecond)), "x-floor")
	b.ReportMetric(float64(first.Milliseconds()), "first-snapshot-ms")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
