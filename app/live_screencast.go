package app

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// maxScreenFrame bounds a frame read from the sandbox.
const maxScreenFrame = 2 << 20

// framePace is the least time between two frames sent to a page: the
// newest frame wins, the ones in between are dropped.
const framePace = 200 * time.Millisecond

// screencast streams the agent's browser to one open page while the run
// lives: frames read from the runner's socket (through the backend) and
// sent as "frame" events. The runner learns nothing of the viewer; the
// page only shows pictures and sends nothing back.
func (lp *livePages) screencast(ctx context.Context, out sse, taskID string) {
	d, ok := lp.backend.(dispatch.ScreencastDialer)
	if !ok {
		return
	}
	for ctx.Err() == nil {
		if c, err := d.DialScreencast(ctx, taskID); err == nil {
			lp.frames(ctx, out, c)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second): // the browser starts when the agent first uses it
		}
	}
}

func (lp *livePages) frames(ctx context.Context, out sse, c io.ReadCloser) {
	defer c.Close()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	var last time.Time
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxScreenFrame {
			return // not the runner's framing: stop reading
		}
		f := make([]byte, n)
		if _, err := io.ReadFull(br, f); err != nil {
			return
		}
		if len(f) < 3 || f[0] != 0xFF || f[1] != 0xD8 || time.Since(last) < framePace && br.Buffered() > 0 {
			continue // not a JPEG, or a newer frame is waiting already
		}
		last = time.Now()
		if err := out.send("frame", "", map[string]string{"data": base64.StdEncoding.EncodeToString(f)}); err != nil {
			return
		}
	}
}
