package media

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// browser is a headless Chromium with one page attached.
type browser struct {
	cmd     *exec.Cmd
	dataDir string
	page    *cdp
	exited  chan struct{}
}

// launchBrowser starts Chromium as cred (nil: this process's user). The
// pages it renders are the agent's dev server's, hostile content: they
// get no more than the agent has, never the runner's token.
func launchBrowser(ctx context.Context, bin string, cred *syscall.Credential) (*browser, error) {
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
	// Its own profile is its home: the runner's is not the agent's to write.
	cmd.Env = append(os.Environ(), "HOME="+dataDir, "XDG_CONFIG_HOME="+dataDir, "XDG_CACHE_HOME="+dataDir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("media: start %s: %w", bin, err)
	}
	b := &browser{cmd: cmd, dataDir: dataDir, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(b.exited) }()
	port, err := b.debugPort(ctx)
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

// debugPort reads the port Chromium chose from DevToolsActivePort.
func (b *browser) debugPort(ctx context.Context) (string, error) {
	p := filepath.Join(b.dataDir, "DevToolsActivePort")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(p); err == nil {
			sc := bufio.NewScanner(f)
			ok := sc.Scan()
			f.Close()
			if ok && sc.Text() != "" {
				return strings.TrimSpace(sc.Text()), nil
			}
		}
		select {
		case <-b.exited:
			return "", errors.New("media: Chromium exited at start")
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", errors.New("media: Chromium did not open its DevTools port within 30s")
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
	os.RemoveAll(b.dataDir)
}
