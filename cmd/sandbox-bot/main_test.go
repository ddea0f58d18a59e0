package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

func buildBot(t *testing.T) string { return testenv.BuildCommand(t, "sandbox-bot") }

// A missing or bad setting fails at start with one line naming it.
func TestBadSettingsFailWithOneLine(t *testing.T) {
	t.Parallel()
	bin := buildBot(t)
	key := testKey(t)
	cases := []struct {
		env  []string
		want string
	}{
		{nil, "GITHUB_APP_INTEGRATION_ID: required"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=x"}, "GITHUB_APP_INTEGRATION_ID: \"x\" is not a number"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1"}, "GITHUB_APP_WEBHOOK_SECRET: required"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=nope"}, "GITHUB_APP_PRIVATE_KEY: not PEM"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + key, "SANDBOX_BACKEND=k8s"}, "SANDBOX_BACKEND: \"k8s\" is not nomad, docker or process"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + key, "SANDBOX_ISOLATION=none"}, "SANDBOX_ISOLATION: \"none\" is not privileged, caps or gvisor"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + key, "SANDBOX_CONFIG=/nonexistent.yml"}, "SANDBOX_CONFIG: open /nonexistent.yml"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + key, "SANDBOX_DATABASE_URL=mysql://u:pw@db/x"}, "SANDBOX_DATABASE_URL: not a PostgreSQL URL"},
		{[]string{"GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + key, "SANDBOX_TRANSCRIPT_RETENTION=forever"}, "SANDBOX_TRANSCRIPT_RETENTION: \"forever\" is not a retention"},
	}
	for _, c := range cases {
		cmd := exec.Command(bin)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("env %v: want one line containing %q and a failure, got err=%v:\n%s", c.env, c.want, err, out)
		}
	}
}

// A shared database the bot cannot reach stops it at start, the last line
// naming the setting and the database, never the password.
func TestUnreachableDatabaseStopsTheStart(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(buildBot(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s", "GITHUB_APP_PRIVATE_KEY=" + testKey(t),
		"SANDBOX_BACKEND=process", "SANDBOX_RUNNER_BINARY=/bin/true", "SANDBOX_DATA_DIR=" + t.TempDir(), "GITHUB_V3_API_URL=http://127.0.0.1:1/",
		"SANDBOX_DATABASE_URL=postgres://bot:hunter2@127.0.0.1:1/receipts?connect_timeout=5"}
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; err == nil || !strings.HasPrefix(last, "sandbox-bot: SANDBOX_DATABASE_URL: receipts: connect to PostgreSQL 127.0.0.1:1/receipts") ||
		!strings.Contains(last, "connection refused") ||
		strings.Contains(string(out), "hunter2") {
		t.Errorf("a bot whose database is unreachable: %v\n%s\nwant it stopped, its last line naming SANDBOX_DATABASE_URL and the database, without the password", err, out)
	}
}

// SIGTERM stops the bot cleanly: it answers until then, drains and exits 0.
func TestServesAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildBot(t)
	runner := testenv.BuildCommand(t, "sandbox-runner")
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=s",
		"GITHUB_APP_PRIVATE_KEY=" + testKey(t), "SANDBOX_LISTEN=" + addr, "SANDBOX_ADMIN_LISTEN=127.0.0.1:0", "SANDBOX_BACKEND=process",
		"SANDBOX_RUNNER_BINARY=" + runner, "SANDBOX_DATA_DIR=" + t.TempDir(), "GITHUB_V3_API_URL=http://127.0.0.1:1/"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	body := waitHealthz(addr, 15*time.Second)
	if !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"backend":"process"`) {
		cmd.Process.Kill()
		t.Fatalf("healthz: %q\n%s", body, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("bot did not stop within 20s of SIGTERM")
	}
	if !strings.Contains(stderr.String(), "WARNING: no sandbox") || !strings.Contains(stderr.String(), `"message":"stopped"`) {
		t.Errorf("want the no-isolation warning and a clean stop in the log:\n%s", stderr.String())
	}
}

// testKey is the App private key of the test binary (githubtest.AppKey):
// generating a 2048-bit key per test costs a CPU-second on a busy machine.
func testKey(t *testing.T) string {
	t.Helper()
	return githubtest.AppKey()
}

// freeAddr is a loopback address with a port free a moment ago, for a bot
// started in another process.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHealthz polls a starting bot's /healthz until it answers and returns
// the body, or "" if it never answered within d.
func waitHealthz(addr string, d time.Duration) string {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ""
}
