// Package media captures what a change looks like: it starts the project's
// dev server, drives a headless Chromium over the DevTools protocol to
// screenshot each configured route and to record a screencast of visiting
// them, and turns the recording into a WebM and an animated WebP (ffmpeg)
// that a PR body can show.
package media

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Options configure one capture.
type Options struct {
	// Chromium and FFmpeg are the binaries (Debian's chromium and ffmpeg).
	Chromium string
	FFmpeg   string
	// Dir is where the dev server starts (the checkout); Env its
	// environment, to which PORT is added.
	Dir string
	Env []string
	// Command starts the dev server; Port is where it listens.
	Command string
	Port    int
	// Routes are the paths to capture, e.g. "/" and "/settings".
	Routes []string
	// OutDir receives screenshots/ and recording.{webm,webp}.
	OutDir string
	// Credential, when set, is the user the dev server (the repository's
	// code) and the browser that renders it run as: the agent's.
	Credential *syscall.Credential
	// StartTimeout bounds the wait for the dev server (default 60s).
	StartTimeout time.Duration
	// Dwell is how long the recording stays on each route (default 1.5s).
	Dwell time.Duration
	Log   zerolog.Logger
}

// Result lists what was written, as absolute paths.
type Result struct {
	Screenshots []string
	// Recordings are the WebM and the animated WebP, when frames came.
	Recordings []string
}

// Viewport of the desktop screenshots and of the recording.
const (
	width  = 1280
	height = 800
)

// Viewport is one width a route is screenshotted at.
type Viewport struct {
	Name          string
	Width, Height int
	Mobile        bool
	// Suffix is added to the route's file name ("" for desktop).
	Suffix string
}

// Viewports are the widths of the screenshots: a laptop and a phone
// (an iPhone 12-15's CSS size), so reviewers see both layouts.
func Viewports() []Viewport {
	return []Viewport{
		{Name: "desktop", Width: width, Height: height},
		{Name: "mobile", Width: 390, Height: 844, Mobile: true, Suffix: "-mobile"},
	}
}

// Lookup finds chromium and ffmpeg on PATH; empty when missing.
func Lookup() (chromium, ffmpeg string) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	ffmpeg, _ = exec.LookPath("ffmpeg")
	return chromium, ffmpeg
}

// Capture runs the dev server and the browser, and leaves the media in
// OutDir. Both processes are gone when it returns.
func Capture(ctx context.Context, o Options) (*Result, error) {
	if o.Chromium == "" {
		return nil, errors.New("media: no Chromium (apt-get install chromium)")
	}
	if o.Command == "" || o.Port == 0 || len(o.Routes) == 0 {
		return nil, errors.New("media: dev.command, dev.port and dev.routes are all needed")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Dwell <= 0 {
		o.Dwell = 1500 * time.Millisecond
	}
	shots := filepath.Join(o.OutDir, "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return nil, err
	}
	stopServer, err := StartDevServer(ctx, DevServer{
		Command: o.Command, Port: o.Port, Dir: o.Dir, Env: o.Env, Credential: o.Credential,
		Log: filepath.Join(o.OutDir, "dev-server.log"), StartTimeout: o.StartTimeout,
	}, o.Log)
	if err != nil {
		return nil, err
	}
	defer stopServer()
	b, err := launchBrowser(ctx, o.Chromium, o.Credential, o.Env)
	if err != nil {
		return nil, err
	}
	defer b.close()
	page := b.page
	if err := page.call(ctx, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	navigate := navigator(ctx, page, "http://127.0.0.1:"+strconv.Itoa(o.Port))
	res := &Result{}
	if res.Screenshots, err = screenshots(ctx, page, navigate, o.Routes, shots, o.Log); err != nil {
		return res, err
	}
	if o.FFmpeg == "" {
		o.Log.Warn().Msg("no ffmpeg: skipping the recording")
		return res, nil
	}
	recs, err := record(ctx, o, page, navigate)
	res.Recordings = recs
	return res, err
}

// navigator returns what loads a route of base in page and waits for the
// load event.
func navigator(ctx context.Context, page *cdp, base string) func(route string) error {
	loads := page.subscribe("Page.loadEventFired", 16)
	return func(route string) error {
		for len(loads) > 0 {
			<-loads
		}
		var nav struct {
			ErrorText string `json:"errorText"`
		}
		if err := page.call(ctx, "Page.navigate", map[string]any{"url": base + route}, &nav); err != nil {
			return err
		}
		if nav.ErrorText != "" {
			return fmt.Errorf("media: open %s: %s", route, nav.ErrorText)
		}
		select {
		case <-loads:
			return nil
		case <-time.After(30 * time.Second):
			return fmt.Errorf("media: %s did not finish loading in 30s", route)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// screenshots takes every route at every viewport into dir, and leaves the
// page at the desktop viewport for the recording.
func screenshots(ctx context.Context, page *cdp, navigate func(string) error, routes []string, dir string, log zerolog.Logger) ([]string, error) {
	var out []string
	for _, vp := range Viewports() {
		if err := page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": vp.Width, "height": vp.Height, "deviceScaleFactor": 1, "mobile": vp.Mobile}, nil); err != nil {
			return out, err
		}
		for _, route := range routes {
			// A fresh load at each width: pages that read the width in
			// script lay out as they would on that device.
			if err := navigate(route); err != nil {
				return out, err
			}
			var shot struct {
				Data string `json:"data"`
			}
			if err := page.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
				return out, err
			}
			png, err := base64.StdEncoding.DecodeString(shot.Data)
			if err != nil {
				return out, fmt.Errorf("media: screenshot of %s at %s: %w", route, vp.Name, err)
			}
			p := filepath.Join(dir, RouteFile(route)+vp.Suffix+".png")
			if err := os.WriteFile(p, png, 0o644); err != nil {
				return out, err
			}
			out = append(out, p)
			log.Info().Str("route", route).Str("viewport", vp.Name).Str("file", p).Msg("screenshot")
		}
	}
	err := page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return out, err
}

// RouteFile names a route's screenshot: "/" is index, "/a/b" is a-b.
func RouteFile(route string) string {
	s := strings.Trim(route, "/")
	if s == "" {
		return "index"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// record screencasts a visit of every route and encodes it.
func record(ctx context.Context, o Options, page *cdp, navigate func(string) error) ([]string, error) {
	framesDir, err := os.MkdirTemp("", "sandbox-frames-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(framesDir)
	frames := page.subscribe("Page.screencastFrame", 256)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case raw := <-frames:
				var f struct {
					Data      string `json:"data"`
					SessionID int    `json:"sessionId"`
				}
				if json.Unmarshal(raw, &f) != nil {
					continue
				}
				// Chromium sends the next frame only after an ack.
				page.call(ctx, "Page.screencastFrameAck", map[string]any{"sessionId": f.SessionID}, nil)
				img, err := base64.StdEncoding.DecodeString(f.Data)
				if err != nil {
					continue
				}
				mu.Lock()
				n++
				name := filepath.Join(framesDir, fmt.Sprintf("frame-%05d.jpg", n))
				mu.Unlock()
				os.WriteFile(name, img, 0o644)
			}
		}
	}()
	if err := page.call(ctx, "Page.startScreencast", map[string]any{"format": "jpeg", "quality": 80, "maxWidth": width, "maxHeight": height}, nil); err != nil {
		close(stop)
		wg.Wait()
		return nil, err
	}
	var navErr error
	for _, route := range o.Routes {
		if navErr = navigate(route); navErr != nil {
			break
		}
		time.Sleep(o.Dwell)
	}
	page.call(ctx, "Page.stopScreencast", nil, nil)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if navErr != nil {
		return nil, navErr
	}
	mu.Lock()
	count := n
	mu.Unlock()
	if count == 0 {
		o.Log.Warn().Msg("the screencast sent no frames: no recording")
		return nil, nil
	}
	webm := filepath.Join(o.OutDir, "recording.webm")
	webp := filepath.Join(o.OutDir, "recording.webp")
	// A headless page sends a frame when it changes; two frames a second
	// keeps each route on screen long enough to see.
	if err := ffmpeg(ctx, o.FFmpeg, "-framerate", "2", "-i", filepath.Join(framesDir, "frame-%05d.jpg"),
		"-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "40", "-pix_fmt", "yuv420p", webm); err != nil {
		return nil, err
	}
	if err := ffmpeg(ctx, o.FFmpeg, "-i", webm, "-vcodec", "libwebp", "-lossless", "0", "-q:v", "60", "-loop", "0", "-an", webp); err != nil {
		return []string{webm}, err
	}
	o.Log.Info().Int("frames", count).Str("webp", webp).Msg("recording")
	return []string{webm, webp}, nil
}

func ffmpeg(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, append([]string{"-y", "-loglevel", "error"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("media: ffmpeg %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
