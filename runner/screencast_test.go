package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/jpeg"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestScreencastOfARealChromium: a headless Chromium with DevTools on a
// loopback port, as chrome-devtools-mcp starts the agent's; the cast
// yields JPEG frames of its page.
func TestScreencastOfARealChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir="+t.TempDir(),
		"--remote-debugging-port="+strconv.Itoa(port), "--window-size=640,400",
		"data:text/html,<body style='background:rgb(200,30,40)'><h1>cast</h1></body>")
	// Chromium's helpers (zygote, renderers, crashpad) go on writing its
	// profile for a moment after the browser process is killed; in a group
	// of their own they are killed with it, and the cleanup waits until
	// none is left before t.TempDir removes the profile.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		waitGroupGone(cmd.Process.Pid, 10*time.Second)
	})
	var ws string
	for ws == "" {
		ws, _ = pageSocketAt(ctx, port)
		if ctx.Err() != nil {
			t.Fatal("Chromium's DevTools never answered")
		}
		time.Sleep(100 * time.Millisecond)
	}
	sc := &screencast{log: zerolog.Nop(), subs: map[chan []byte]struct{}{}}
	got := make(chan []byte, 4)
	sc.subs[got] = struct{}{}
	go func() { _ = sc.cast(ctx, ws) }()
	select {
	case f := <-got:
		img, err := jpeg.Decode(bytes.NewReader(f))
		if err != nil {
			t.Fatalf("a frame that is not a JPEG: %v", err)
		}
		r, g, b, _ := img.At(img.Bounds().Dx()-5, img.Bounds().Dy()-5).RGBA()
		if r>>8 < 170 || g>>8 > 70 || b>>8 > 80 {
			t.Errorf("the frame's corner is %d,%d,%d; want the page's red", r>>8, g>>8, b>>8)
		}
	case <-ctx.Done():
		t.Fatal("no frame within a minute")
	}
}

// waitGroupGone waits, at most timeout, until no process of the group
// pgid is left (the group is killed first). Killed processes that nobody
// has reaped yet still count, so it gives up quietly at the deadline: a
// dead process writes nothing.
func waitGroupGone(pgid int, timeout time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(timeout)
	for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// hostileDevTools answers on a DevTools port as the agent could (it can
// bind the port before its browser does): a page whose screencast pushes
// frames at fps, never waiting for an ack.
func hostileDevTools(t *testing.T, fps int, frame []byte) string {
	t.Helper()
	up := websocket.Upgrader{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/json/list" {
			fmt.Fprintf(w, `[{"type":"page","url":"http://x/","webSocketDebuggerUrl":"ws://%s/page"}]`, srv.Listener.Addr())
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		go func() { // read and ignore the acks
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
		data := base64.StdEncoding.EncodeToString(frame)
		tick := time.NewTicker(time.Second / time.Duration(fps))
		defer tick.Stop()
		for range tick.C {
			if c.WriteJSON(map[string]any{"method": "Page.screencastFrame", "params": map[string]any{"data": data, "sessionId": 1}}) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestScreencastPaceHoldsAgainstAFloodingPort: a port pushing 100 frames a
// second gets at most five a second through the runner, by time.
func TestScreencastPaceHoldsAgainstAFloodingPort(t *testing.T) {
	t.Parallel()
	frame := append([]byte{0xFF, 0xD8, 0xFF}, bytes.Repeat([]byte{1}, 1000)...)
	addr := hostileDevTools(t, 100, frame)
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws, err := pageSocketAt(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	sc := &screencast{log: zerolog.Nop(), subs: map[chan []byte]struct{}{}}
	got := make(chan []byte, 1000)
	sc.subs[got] = struct{}{}
	castCtx, stop := context.WithCancel(ctx)
	start := time.Now()
	go func() { _ = sc.cast(castCtx, ws) }()
	for len(got) < 10 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	elapsed := time.Since(start)
	if n, most := len(got), int(elapsed/framePace)+1; n > most {
		t.Errorf("%d frames in %s from a port pushing 100 a second; want at most %d (five a second)", n, elapsed, most)
	}
}
