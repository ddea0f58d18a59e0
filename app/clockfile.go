package app

import (
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// fileClock is the routines' scheduler's clock when SANDBOX_CLOCK_FILE
// names a file: now is the RFC 3339 time written in it, and a timer fires
// once that time reaches its deadline. Tests of the assembled bot advance
// it by rewriting the file; the bot's other waits keep the system clock.
// It looks at the file every poll, so it is for tests only.
type fileClock struct {
	path string
	poll time.Duration
	log  zerolog.Logger

	mu     sync.Mutex
	warned bool
}

func newFileClock(path string, log zerolog.Logger) *fileClock {
	return &fileClock{path: path, poll: 20 * time.Millisecond, log: log}
}

// Now is the time in the file; the system clock while the file cannot be
// read (said once).
func (c *fileClock) Now() time.Time {
	raw, err := os.ReadFile(c.path)
	var t time.Time
	if err == nil {
		t, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(string(raw)))
	}
	if err != nil {
		c.mu.Lock()
		if !c.warned {
			c.warned = true
			c.log.Warn().Err(err).Str("file", c.path).Msg("SANDBOX_CLOCK_FILE: not an RFC 3339 time; the routines use the system clock until it is")
		}
		c.mu.Unlock()
		return time.Now()
	}
	return t
}

// AfterFunc calls f on its own goroutine once Now reaches d past the time
// it was armed at; stop reports whether it stopped f from being called.
func (c *fileClock) AfterFunc(d time.Duration, f func()) func() bool {
	deadline := c.Now().Add(d)
	var mu sync.Mutex
	done := false
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(c.poll)
		defer t.Stop()
		for {
			if !c.Now().Before(deadline) {
				mu.Lock()
				fire := !done
				done = true
				mu.Unlock()
				if fire {
					f()
				}
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return false
		}
		done = true
		close(stop)
		return true
	}
}
