package runner

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxFrame bounds one JPEG frame handed to the bot.
const maxFrame = 2 << 20

// screencast shows the agent's browser on the live page, read-only: the
// runner attaches to the page of the agent's Chromium over the DevTools
// protocol (on the sandbox's loopback, dispatch.BrowserDebugPort), asks
// for Chromium's screencast, and hands the frames to whoever is connected
// to its socket (the bot, dispatch.ScreencastSocket). It sends no input to
// the page; the agent is told nothing of it, and the bot nothing of who
// watches the socket's other end.
type screencast struct {
	log zerolog.Logger

	mu   sync.Mutex
	subs map[chan []byte]struct{}
	last []byte // the newest frame, for a viewer that comes late
}

// startScreencast listens on the runner's socket for the run's life; it
// returns nil when the sandbox offers no place for it (another backend,
// the process backend, task mode).
func startScreencast(parent context.Context, log zerolog.Logger) *screencast {
	dir := filepath.Join(dispatch.PreviewDir, dispatch.ScreencastDir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil
	}
	path := filepath.Join(dir, dispatch.ScreencastSocket)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn().Err(err).Msg("screencast: no socket; the live page shows no browser")
		return nil
	}
	_ = os.Chmod(path, 0o666) // the directory (the runner's, 0700) is the gate
	sc := &screencast{log: log.With().Str("part", "screencast").Logger(), subs: map[chan []byte]struct{}{}}
	go func() {
		<-parent.Done()
		ln.Close()
	}()
	go sc.serve(ln)
	return sc
}

// serve writes every frame to every connection, the newest first.
func (sc *screencast) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go sc.feed(c)
	}
}

func (sc *screencast) feed(c net.Conn) {
	defer c.Close()
	ch := make(chan []byte, 2)
	sc.mu.Lock()
	sc.subs[ch] = struct{}{}
	if sc.last != nil {
		ch <- sc.last
	}
	sc.mu.Unlock()
	defer func() {
		sc.mu.Lock()
		delete(sc.subs, ch)
		sc.mu.Unlock()
	}()
	var hdr [4]byte
	for f := range ch {
		binary.BigEndian.PutUint32(hdr[:], uint32(len(f)))
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(hdr[:]); err != nil {
			return
		}
		if _, err := c.Write(f); err != nil {
			return
		}
	}
}

// publish hands a frame to every viewer; a slow one misses frames rather
// than slowing the others.
func (sc *screencast) publish(f []byte) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.last = f
	for ch := range sc.subs {
		select {
		case ch <- f:
		default:
		}
	}
}

// watch follows the agent's browser while ctx lives (one agent pass): it
// waits for Chromium's DevTools to answer (the agent starts its browser
// on first use), attaches to its page, and casts until the page or the
// browser goes, then looks again.
func (sc *screencast) watch(ctx context.Context) {
	if sc == nil {
		return
	}
	for ctx.Err() == nil {
		ws, err := pageSocket(ctx)
		if err == nil {
			err = sc.cast(ctx, ws)
		}
		if err != nil && ctx.Err() == nil {
			sc.log.Debug().Err(err).Msg("no browser page to cast yet")
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// pageSocket is the DevTools WebSocket of the page the agent works in:
// the first that shows something (not about:blank), else the first.
func pageSocket(ctx context.Context) (string, error) {
	return pageSocketAt(ctx, dispatch.BrowserDebugPort)
}

func pageSocketAt(ctx context.Context, port int) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/json/list", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var targets []struct {
		Type, URL            string
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	// Whatever answers on that port is the agent's (it can bind it before
	// its browser does): read it as untrusted, and boundedly.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&targets); err != nil {
		return "", err
	}
	first := ""
	for _, t := range targets {
		if t.Type != "page" || t.WebSocketDebuggerURL == "" {
			continue
		}
		if t.URL != "about:blank" && t.URL != "" {
			return t.WebSocketDebuggerURL, nil
		}
		if first == "" {
			first = t.WebSocketDebuggerURL
		}
	}
	if first == "" {
		return "", errors.New("the browser has no page")
	}
	return first, nil
}

// cast runs Chromium's screencast on one page until it ends.
func (sc *screencast) cast(ctx context.Context, ws string) error {
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, ws, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadLimit(2 * maxFrame) // a frame's base64, and no more
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	var wmu sync.Mutex
	send := func(id int, method string, params any) error {
		wmu.Lock()
		defer wmu.Unlock()
		return conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	}
	if err := send(1, "Page.startScreencast", map[string]any{"format": "jpeg", "quality": 60, "maxWidth": 1280, "maxHeight": 800}); err != nil {
		return err
	}
	sc.log.Info().Msg("casting the agent's browser to the live page")
	// A page that paints nothing for a while (a background tab, one the
	// agent left) is given up for whichever it works in now.
	var published time.Time
	for id := 2; ; id++ {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var msg struct {
			Method string
			Params struct {
				Data      string
				SessionID int `json:"sessionId"`
			}
		}
		if err := conn.ReadJSON(&msg); err != nil {
			return err
		}
		if msg.Method == "Inspector.detached" || msg.Method == "Inspector.targetCrashed" {
			return errors.New(msg.Method)
		}
		if msg.Method != "Page.screencastFrame" {
			continue
		}
		// The pace holds by time, whatever the port sends: a frame comes
		// out at most every framePace, the ones in between are dropped
		// undecoded, and the ack (Chromium sends its next frame once this
		// one is acked) waits for the next slot, so a real browser paints
		// no frames nobody is shown.
		if time.Since(published) >= framePace {
			f, err := base64.StdEncoding.DecodeString(msg.Params.Data)
			if err != nil || len(f) > maxFrame {
				return fmt.Errorf("a frame that is not a JPEG of at most %d bytes", maxFrame)
			}
			sc.publish(f)
			published = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(published.Add(framePace))):
		}
		if err := send(id, "Page.screencastFrameAck", map[string]any{"sessionId": msg.Params.SessionID}); err != nil {
			return err
		}
	}
}

// framePace is the least time between two frames handed to the bot: at
// most five a second.
const framePace = 200 * time.Millisecond
