package runner

import (
	"bytes"
	"context"
	"image/jpeg"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/testenv"
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
