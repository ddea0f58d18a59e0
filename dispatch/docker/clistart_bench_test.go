package docker_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkAgentCLIStart measures the agent CLIs' own start: from the
// CLI's exec to its first model request (the scripted server's clock), and
// to its exit after a one-turn answer, in a fresh container of the sandbox
// image as the sandbox user (its HOME as the image ships it, as in every
// run) beside the same command on the host with a HOME the CLI has started
// in before. Host and sandbox alternate:
//
//	go test -run '^$' -bench AgentCLIStart -benchtime 3x ./dispatch/docker/
//
// The container's start is not in the figure: the command inside prints
// its clock right before it execs the CLI.
func BenchmarkAgentCLIStart(b *testing.B) {
	img := testenv.SandboxImage(b)
	gw := dockertest.Gateway(b)
	b.Run("opencode", func(b *testing.B) {
		bin := testenv.NPMBin(b, "opencode")
		srv, err := modeltest.New(gw+":0", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Close)
		env := runtest.OpenCodeEnv(b, srv)
		// The operator's opencode.json (the scripted provider) is a file in
		// both places.
		cfg, err := srv.WriteOpenCodeConfig(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		cli := cliUnderTest{name: "opencode", bin: bin, h: harness.NewOpenCode(bin), env: env,
			first: func(since time.Time) time.Time {
				for _, r := range srv.Requests() {
					if !r.Time.Before(since) {
						return r.Time
					}
				}
				return time.Time{}
			},
			turn:  func() { srv.Append(modeltest.Turn{Text: "Hello."}) },
			model: srv.OpenCodeModel(), sandboxEnv: []string{"OPENCODE_CONFIG=/etc/opencode-bench.json"},
			mounts: []string{"type=bind,source=" + cfg + ",target=/etc/opencode-bench.json,readonly"}}
		cli.bench(b, img)
	})
	b.Run("claude-code", func(b *testing.B) {
		bin := testenv.NPMBin(b, "claude")
		srv, err := modeltest.NewAnthropic(gw+":0", modeltest.AnthropicScript{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Close)
		env := append(runtest.HermeticEnv(b.TempDir()), srv.Env()...)
		cli := cliUnderTest{name: "claude", bin: bin, h: harness.NewClaudeCode(bin), env: env,
			first: func(since time.Time) time.Time {
				for _, r := range srv.Requests() {
					if !r.Time.Before(since) {
						return r.Time
					}
				}
				return time.Time{}
			},
			turn:  func() { srv.Append(modeltest.AnthropicTurn{Text: "Hello."}) },
			model: modeltest.AnthropicModelID, sandboxEnv: srv.Env()}
		cli.bench(b, img)
	})
}

type cliUnderTest struct {
	name, bin, model string
	h                harness.Harness
	env              []string
	// sandboxEnv is what the CLI gets in the container besides the
	// harness's own settings (its provider's address).
	sandboxEnv []string
	mounts     []string
	first      func(since time.Time) time.Time // the first request at or after since
	turn       func()
}

// passed picks the harness's own settings from a command's environment.
func passed(env []string) []string {
	var out []string
	for _, kv := range env {
		for _, p := range []string{"OPENCODE_", "DISABLE_", "CLAUDE_CODE_", "ANTHROPIC_"} {
			if strings.HasPrefix(kv, p) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// host runs the CLI on the host; it returns exec → first request and exec
// → exit.
func (c cliUnderTest) host(b *testing.B) (time.Duration, time.Duration) {
	c.turn()
	dir := b.TempDir()
	cmd, err := c.h.Command(harness.Request{Dir: dir, Prompt: "Say hello.", Model: c.model, Env: c.env, ReadOnly: true, BudgetUSD: 1})
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s on the host: %v\n%s", c.name, err, out.String())
	}
	end := time.Now()
	return c.first(start).Sub(start), end.Sub(start)
}

// sandbox runs the CLI in a fresh container of the image.
func (c cliUnderTest) sandbox(b *testing.B, img string) (time.Duration, time.Duration) {
	c.turn()
	cmd, err := c.h.Command(harness.Request{Dir: "/tmp/work", Prompt: "Say hello.", Model: c.model, Env: c.sandboxEnv, ReadOnly: true, BudgetUSD: 1})
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"run", "--rm", "-i", "--user", "1000:1000", "--entrypoint", "sh", "-e", "HOME=/home/sandbox", "-w", "/tmp"}
	// SANDBOX_CLISTART_DOCKER_ARGS adds to the sandbox's docker run (for
	// example "--runtime runsc": the CLI's start behind gVisor).
	args = append(args, strings.Fields(os.Getenv("SANDBOX_CLISTART_DOCKER_ARGS"))...)
	for _, kv := range passed(cmd.Env) {
		args = append(args, "-e", kv)
	}
	for _, m := range c.mounts {
		args = append(args, "--mount", m)
	}
	args = append(args, img, "-c", `mkdir -p /tmp/work && cd /tmp/work && echo "CLISTART $(date +%s%N)" >&2 && exec "$@"`, "sh", c.name)
	args = append(args, cmd.Args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, "docker", args...)
	run.Stdin = cmd.Stdin
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Run(); err != nil {
		b.Fatalf("%s in the sandbox image: %v\n%s", c.name, err, out.String())
	}
	end := time.Now()
	start := cliStart(b, out.String())
	return c.first(start).Sub(start), end.Sub(start)
}

func cliStart(b *testing.B, out string) time.Time {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "CLISTART "); ok {
			ns, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return time.Unix(0, ns)
			}
		}
	}
	b.Fatalf("no CLISTART line in:\n%s", out)
	return time.Time{}
}

func (c cliUnderTest) bench(b *testing.B, img string) {
	c.host(b) // the host's HOME warm, as a developer's is
	var hf, he, sf, se time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var h1, h2, s1, s2 time.Duration
		if i%2 == 0 {
			h1, h2 = c.host(b)
			s1, s2 = c.sandbox(b, img)
		} else {
			s1, s2 = c.sandbox(b, img)
			h1, h2 = c.host(b)
		}
		b.Logf("%s: first request host %s, sandbox %s; exit host %s, sandbox %s", c.name,
			h1.Round(time.Millisecond), s1.Round(time.Millisecond), h2.Round(time.Millisecond), s2.Round(time.Millisecond))
		hf, he, sf, se = hf+h1, he+h2, sf+s1, se+s2
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(hf.Milliseconds())/n, "host-first-ms")
	b.ReportMetric(float64(sf.Milliseconds())/n, "sandbox-first-ms")
	b.ReportMetric(float64(sf)/float64(hf), "first-x-host")
	b.ReportMetric(float64(he.Milliseconds())/n, "host-exit-ms")
	b.ReportMetric(float64(se.Milliseconds())/n, "sandbox-exit-ms")
}
