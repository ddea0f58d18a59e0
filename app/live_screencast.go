package app

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxScreenFrame bounds a frame read from the sandbox.
const maxScreenFrame = 2 << 20

// The screencast's pace, held by time whatever the sandbox sends: one
// viewer's pages together get at most screenFPS frames a second and
// screenBytesPerSecond of frames (past a burst of one largest frame); the
// newest frame wins and those in between are dropped. One run's reader
// takes at most screenReadBytesPerSecond from the sandbox, so a sandbox
// that floods its socket costs the bot no more than that.
const (
	screenFPS                = 5
	screenBytesPerSecond     = 1 << 20
	screenReadBytesPerSecond = 4 << 20
	// screenRedial is the first wait before the reader dials again (the
	// agent's browser is not up yet, or went); it doubles to
	// screenRedialMax while nothing comes.
	screenRedial    = 2 * time.Second
	screenRedialMax = 30 * time.Second
)

// screencasts stream the agent's browser to the open pages: one reader
// per run on this replica, whatever the number of pages open on it (on
// Nomad each dial is an exec session), started by the first page and
// stopped with the last. The runner learns nothing of the viewers; the
// pages only show pictures and send nothing back.
type screencasts struct {
	dialer dispatch.ScreencastDialer // nil: the backend offers none
	log    zerolog.Logger

	mu    sync.Mutex
	casts map[string]*screenFeed
}

// screenFeed is one run's newest frame and who watches it.
type screenFeed struct {
	mu      sync.Mutex
	frame   []byte
	seq     int
	changed chan struct{} // closed and replaced at every frame
	pages   int
	budgets map[string]*screenBudget
	cancel  context.CancelFunc
}

// screenBudget is one viewer's pace, shared by all their pages of a run.
type screenBudget struct {
	frames, bytes *rate.Limiter
	pages         int
}

func newScreencasts(b dispatch.Backend, log zerolog.Logger) *screencasts {
	d, _ := b.(dispatch.ScreencastDialer)
	return &screencasts{dialer: d, log: log, casts: map[string]*screenFeed{}}
}

// watch returns the run's feed (starting its reader if needed) and the
// viewer's budget, and what releases both.
func (h *screencasts) watch(taskID, who string) (*screenFeed, *screenBudget, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.casts[taskID]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &screenFeed{changed: make(chan struct{}), budgets: map[string]*screenBudget{}, cancel: cancel}
		h.casts[taskID] = f
		go h.read(ctx, taskID, f)
	}
	f.pages++
	b := f.budgets[who]
	if b == nil {
		b = &screenBudget{frames: rate.NewLimiter(screenFPS, 1), bytes: rate.NewLimiter(screenBytesPerSecond, maxScreenFrame)}
		f.budgets[who] = b
	}
	b.pages++
	var once sync.Once
	return f, b, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if b.pages--; b.pages == 0 {
				delete(f.budgets, who)
			}
			if f.pages--; f.pages == 0 {
				f.cancel()
				delete(h.casts, taskID)
			}
		})
	}
}

// read follows the run's screencast socket until the last page goes,
// dialling again with backoff while nothing comes.
func (h *screencasts) read(ctx context.Context, taskID string, f *screenFeed) {
	wait := screenRedial
	pace := rate.NewLimiter(screenReadBytesPerSecond, maxScreenFrame+4)
	for ctx.Err() == nil {
		if c, err := h.dialer.DialScreencast(ctx, taskID); err == nil {
			if h.frames(ctx, c, f, pace) {
				wait = screenRedial
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait): // the browser starts when the agent first uses it
		}
		wait = min(2*wait, screenRedialMax)
	}
}

// frames reads one connection's frames into the feed; it reports whether
// any came.
func (h *screencasts) frames(ctx context.Context, c io.ReadCloser, f *screenFeed, pace *rate.Limiter) (any bool) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return any
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxScreenFrame {
			return any // not the runner's framing: stop reading
		}
		if pace.WaitN(ctx, int(n)+4) != nil {
			return any
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(br, frame); err != nil {
			return any
		}
		if len(frame) < 3 || frame[0] != 0xFF || frame[1] != 0xD8 {
			continue // not a JPEG
		}
		any = true
		f.mu.Lock()
		f.frame, f.seq = frame, f.seq+1
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
	}
}

func (f *screenFeed) latest() ([]byte, int, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frame, f.seq, f.changed
}

// screencast streams the agent's browser to one open page of who while
// the run lives, as "frame" events within the viewer's budget.
func (lp *livePages) screencast(ctx context.Context, out sse, taskID, who string) {
	if lp.casts.dialer == nil {
		return
	}
	f, b, release := lp.casts.watch(taskID, who)
	defer release()
	sent := 0
	for {
		_, seq, changed := f.latest()
		if seq == sent {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		if b.frames.Wait(ctx) != nil {
			return
		}
		frame, seq, _ := f.latest() // the newest, after the wait
		if b.bytes.WaitN(ctx, len(frame)) != nil {
			return
		}
		sent = seq
		if err := out.send("frame", "", map[string]string{"data": base64.StdEncoding.EncodeToString(frame)}); err != nil {
			return
		}
	}
}
