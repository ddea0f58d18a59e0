package media

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// browser is a headless Chromium with one page attached.
type browser struct {
	cmd     *exec.Cmd
	dataDir string
	// cred is the user the browser and its profile belong to.
	cred   *syscall.Credential
	page   *cdp
	exited chan struct{}
	// out keeps the last lines Chromium printed, for errors.
	out *lastLines
}

// launchBrowser starts Chromium as cred (nil: this process's user) with
// env, the agent's environment (nil: this process's). The pages it renders
// are the agent's dev server's, hostile content: they get no more than the
// agent has, never the runner's token or environment.
//
// In the sandbox the runner and the agent are two unprivileged users, so
// nothing here may rely on the runner reading what Chromium writes: the
// DevTools address comes from Chromium's stderr (a pipe the runner made and
// Chromium inherited), not from DevToolsActivePort in its profile, which
// is the agent's and private to it.
func launchBrowser(ctx context.Context, bin string, cred *syscall.Credential, env []string) (*browser, error) {
	dataDir, err := os.MkdirTemp("", "sandbox-chromium-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dataDir)
			return nil, fmt.Errorf("media: give the browser's profile to uid %d: %w", cred.Uid, err)
		}
	}
	// The flags DESIGN.md lists: no sandbox (we are in one), no GPU, and
	// nothing that phones home.
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--user-data-dir="+dataDir, fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if env == nil {
		env = os.Environ()
	}
	// Its own profile is its home: not even the agent's HOME is the
	// browser's to write.
	cmd.Env = append(dotenv.Without(env, "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"), "HOME="+dataDir, "XDG_CONFIG_HOME="+dataDir, "XDG_CACHE_HOME="+dataDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		removeAs(cred, dataDir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		removeAs(cred, dataDir)
		return nil, fmt.Errorf("media: start %s: %w", bin, err)
	}
	b := &browser{cmd: cmd, dataDir: dataDir, cred: cred, exited: make(chan struct{}), out: &lastLines{max: 20}}
	devtools := make(chan string, 1)
	go b.readStderr(stderr, devtools)
	go func() { cmd.Wait(); close(b.exited) }()
	port, err := b.debugPort(ctx, devtools)
	if err != nil {
		b.close()
		return nil, err
	}
	ws, err := pageSocket(ctx, port)
	if err != nil {
		b.close()
		return nil, err
	}
	if b.page, err = dialCDP(ctx, ws); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// devtoolsLine is how Chromium announces its DevTools endpoint on stderr.
var devtoolsLine = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// readStderr hands the DevTools URL to found once and keeps the last lines
// for an error that needs them; it reads until Chromium closes stderr.
func (b *browser) readStderr(r io.Reader, found chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := devtoolsLine.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[1]:
			default:
			}
			continue
		}
		b.out.add(line)
	}
}

// debugPort waits for the port Chromium announced.
func (b *browser) debugPort(ctx context.Context, devtools <-chan string) (string, error) {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case ws := <-devtools:
		u, err := url.Parse(ws)
		if err != nil || u.Port() == "" {
			return "", fmt.Errorf("media: Chromium announced DevTools at %q, which has no port", ws)
		}
		return u.Port(), nil
	case <-b.exited:
		return "", fmt.Errorf("media: Chromium exited at start%s", b.out.suffix())
	case <-ctx.Done():
		return "", ctx.Err()
	case <-timeout.C:
		return "", fmt.Errorf("media: Chromium did not open its DevTools port within 30s%s", b.out.suffix())
	}
}

func pageSocket(ctx context.Context, port string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/json/list", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("media: list Chromium's pages: %w", err)
	}
	defer resp.Body.Close()
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return "", fmt.Errorf("media: Chromium's page list: %w", err)
	}
	for _, t := range targets {
		if t.Type == "page" && t.WS != "" {
			return t.WS, nil
		}
	}
	return "", errors.New("media: Chromium has no page to drive")
}

func (b *browser) close() {
	if b.page != nil {
		b.page.close()
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
	removeAs(b.cred, b.dataDir)
}

// removeAs removes dir as cred: the profile Chromium wrote as the agent
// is the agent's, and in the sandbox the runner cannot remove what is in
// it.
func removeAs(cred *syscall.Credential, dir string) {
	if cred == nil {
		os.RemoveAll(dir)
		return
	}
	cmd := exec.Command("rm", "-rf", "--", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	_ = cmd.Run()
	os.Remove(dir)
}

// lastLines keeps the last max lines written to it.
type lastLines struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *lastLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == l.max {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

// suffix is ": <the last lines>" for an error, or "" when there are none.
func (l *lastLines) suffix() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return ""
	}
	tail := l.lines[max(0, len(l.lines)-3):]
	return ": " + strings.Join(tail, " | ")
}
