package docker_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkOpenCodeAgentStage measures the OpenCode agent stage of a plan
// run in the sandbox (caps profile, the init's model gateway, the agent as
// the sandbox user, a fresh container as in production) beside the floor
// of the same `opencode run` started warm on the host (the harness's own
// command line, a checkout of the same repository, a HOME OpenCode has
// started in before), against one scripted model with the same two-step
// conversation (a shell call, then the plan). Host and sandbox alternate,
// so load on the machine hits both alike. The goal is a ratio of at most
// 1.5:
//
//	go test -run '^$' -bench OpenCodeAgentStage -benchtime 3x ./dispatch/docker/
//
// The sandbox's figure is the runner's own "agent ended" took (agent
// process start to exit), the floor's is the same span on the host.
func BenchmarkOpenCodeAgentStage(b *testing.B) {
	img := testenv.SandboxImage(b)
	bin := testenv.NPMBin(b, "opencode")
	remote := runtest.NewRemote(b, map[string]string{"README.md": "# demo\n", "add.sh": "echo $(($1 + $2))\n"})
	git := dockertest.ServeGit(b, remote.Dir, "tok-1")
	srv, err := modeltest.New(dockertest.Gateway(b)+":0", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	turns := func() []modeltest.Turn {
		return []modeltest.Turn{
			{ToolCalls: []modeltest.ToolCall{{Name: "bash", Args: map[string]any{"command": "ls", "description": "list files"}}},
				Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 20}},
			{Text: "1. Document add.sh in README.md.", Usage: modeltest.Usage{PromptTokens: 1100, CompletionTokens: 10}},
		}
	}

	// The sandbox's provider is served by the init's gateway, as in
	// production; the operator's definition has a base URL that does not
	// answer, so only the gateway carries the requests.
	backend, err := docker.New(docker.Options{
		Image: img, Isolation: dispatch.IsolationCaps, DataDir: b.TempDir(), StopGrace: 30 * time.Second,
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Env:        map[string]string{dispatch.EnvOpenCodeConfigJSON: srv.OpenCodeConfigBehindGateway()},
		Gateway: &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
			{Name: modeltest.ProviderID, BaseURL: srv.URL, API: dispatch.APIOpenAI, Key: "bench-key"}}},
		Logger: zerolog.New(zerolog.NewTestWriter(b)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		b.Fatal(err)
	}
	sandbox := func() time.Duration {
		srv.Append(turns()...)
		id := fmt.Sprintf("T-%08X", rand.Uint32())
		cfg := sandboxcfg.Config{Harness: "opencode", Model: srv.OpenCodeModel(), InactivitySeconds: 600}
		spec := dockertest.PlanSpec(id, git.URL, dispatch.TaskText{Title: "Document add.sh", Body: "Say what add.sh does."}, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		res := dockertest.RunToEnd(ctx, b, backend, spec)
		if res.Status != dispatch.StatusCompleted {
			b.Fatalf("sandbox %s: status %s: %+v", id, res.Status, res.Error)
		}
		took := agentTook(b, "sandbox-"+id+"-plan")
		b.Logf("sandbox OpenCode log (ms from its first line):\n%s", openCodeLog(b, "sandbox-"+id+"-plan"))
		return took
	}

	h := harness.NewOpenCode(bin)
	env := runtest.OpenCodeEnv(b, srv)
	host := func() time.Duration {
		srv.Append(turns()...)
		dir := b.TempDir()
		runtest.Git(b, dir, "clone", "--quiet", remote.Dir, "repo")
		cmd, err := h.Command(harness.Request{Dir: filepath.Join(dir, "repo"), Prompt: "Write a plan for: Document add.sh",
			Model: srv.OpenCodeModel(), Env: env, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		return runtest.TimedRun(b, "opencode run on the host", cmd)
	}

	// Warm the host's OpenCode (its HOME, database, page cache) and the
	// engine once; the sandbox is never warmed: every run is a fresh
	// container, as in production.
	host()
	var hostSum, boxSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var hd, sd time.Duration
		if i%2 == 0 {
			hd, sd = host(), sandbox()
		} else {
			sd, hd = sandbox(), host()
		}
		b.Logf("host %s, sandbox %s (x%.2f)", hd.Round(time.Millisecond), sd.Round(time.Millisecond), float64(sd)/float64(hd))
		hostSum += hd
		boxSum += sd
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(hostSum.Milliseconds())/n, "host-ms")
	b.ReportMetric(float64(boxSum.Milliseconds())/n, "sandbox-ms")
	b.ReportMetric(float64(boxSum)/float64(hostSum), "x-of-host")
}

// agentTook reads the runner's "agent ended" log line from a finished
// sandbox and returns its took (agent process start to exit).
func agentTook(b *testing.B, container string) time.Duration {
	b.Helper()
	out, err := exec.Command("docker", "logs", container).CombinedOutput()
	if err != nil {
		b.Fatalf("docker logs %s: %v", container, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"message":"agent ended"`)) {
			continue
		}
		var ev struct {
			Took float64 `json:"took"` // zerolog's default: milliseconds
		}
		if err := json.Unmarshal(line, &ev); err != nil || ev.Took <= 0 {
			b.Fatalf("agent ended line without took: %s", line)
		}
		return time.Duration(ev.Took * float64(time.Millisecond))
	}
	b.Fatalf("no \"agent ended\" line in the log of %s:\n%s", container, lastLines(string(out), 40))
	return 0
}

// openCodeLog returns OpenCode's own log from a finished sandbox, each
// line's timestamp replaced by milliseconds since the first, so a slow
// stage shows where its time went.
func openCodeLog(b *testing.B, container string) string {
	b.Helper()
	out, err := exec.Command("docker", "cp", container+":/home/sandbox/.local/share/opencode/log", "-").Output()
	if err != nil {
		return fmt.Sprintf("(no OpenCode log: %v)", err)
	}
	var text strings.Builder
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if strings.HasSuffix(hdr.Name, ".log") {
			io.Copy(&text, tr) //nolint:errcheck // diagnostics only
		}
	}
	var first time.Time
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text.String()), "\n") {
		ts, rest, ok := strings.Cut(l, " ")
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(ts, "timestamp="))
		if !ok || err != nil {
			lines = append(lines, l)
			continue
		}
		if first.IsZero() {
			first = t
		}
		lines = append(lines, fmt.Sprintf("%6d %s", t.Sub(first).Milliseconds(), clipLine(rest, 160)))
	}
	return strings.Join(lines, "\n")
}

func clipLine(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
