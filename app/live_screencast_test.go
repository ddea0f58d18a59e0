package app

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

// floodingScreen is a backend whose screencast socket pushes frames as
// fast as it is read, counting the dials.
type floodingScreen struct {
	*backendtest.Memory
	dials atomic.Int64
}

func (b *floodingScreen) DialScreencast(ctx context.Context, taskID string) (net.Conn, error) {
	b.dials.Add(1)
	bot, sandbox := net.Pipe()
	go func() {
		defer sandbox.Close()
		frame := append([]byte{0xFF, 0xD8, 0xFF}, make([]byte, 20<<10)...)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(frame)))
		for {
			if _, err := sandbox.Write(hdr[:]); err != nil {
				return
			}
			if _, err := sandbox.Write(frame); err != nil {
				return
			}
		}
	}()
	return bot, nil
}

// TestScreencastOneReaderAndAPaceByTime: three pages of a run (two of one
// viewer) share one read of the sandbox's socket, and a socket that
// floods gets each viewer at most five frames a second, by time.
func TestScreencastOneReaderAndAPaceByTime(t *testing.T) {
	t.Parallel()
	b := &floodingScreen{Memory: backendtest.NewMemory()}
	lp := &livePages{backend: b, casts: newScreencasts(b, zerolog.Nop()), log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(t.Context())
	type page struct {
		rec *httptest.ResponseRecorder
		mu  *sync.Mutex
	}
	var pages []page
	var wg sync.WaitGroup
	start := time.Now()
	for _, who := range []string{"alice", "alice", "bob"} {
		rec := httptest.NewRecorder()
		p := page{rec: rec, mu: &sync.Mutex{}}
		pages = append(pages, p)
		out := sse{mu: p.mu, w: rec, rc: http.NewResponseController(rec)}
		wg.Add(1)
		go func() { defer wg.Done(); lp.screencast(ctx, out, "T-5C5C5C5C", who) }()
	}
	frames := func(p page) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return strings.Count(p.rec.Body.String(), "event: frame")
	}
	for deadline := time.Now().Add(30 * time.Second); frames(pages[2]) < 8; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("bob's page got too few frames within 30 s")
		}
	}
	cancel()
	wg.Wait()
	most := int(time.Since(start).Seconds()*screenFPS) + 1
	if n := frames(pages[0]) + frames(pages[1]); n > most {
		t.Errorf("alice's two pages got %d frames in %s; want at most %d together (five a second per viewer)", n, time.Since(start), most)
	}
	if n := frames(pages[2]); n > most {
		t.Errorf("bob's page got %d frames in %s; want at most %d", n, time.Since(start), most)
	}
	if n := b.dials.Load(); n != 1 {
		t.Errorf("%d reads of the run's screencast for three pages; want one", n)
	}
	lp.casts.mu.Lock()
	left := len(lp.casts.casts)
	lp.casts.mu.Unlock()
	if left != 0 {
		t.Errorf("the run's reader is still there after its last page went")
	}
	var _ dispatch.ScreencastDialer = b
}
