package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Wait implements dispatch.Backend. It follows the container's log with
// `docker logs --follow --timestamps`, hands every progress line on stdout
// to progress, and returns once the container has ended. If the log stream
// breaks while the sandbox still runs (the engine restarted), it resumes
// after the last line it saw. The log is followed before the engine is
// asked about the run: Wait mostly starts right after Submit, while the
// container runs, and a status first would be one more docker call per
// run; the status after the log ends says whether the run ended, is still
// pending (the log is then followed again once it runs) or is gone.
func (b *watcher) Wait(ctx context.Context, taskID string, progress func(dispatch.Progress)) (dispatch.RunStatus, error) {
	name, rec, err := b.lookup(ctx, taskID)
	if err != nil {
		return dispatch.RunStatus{}, err
	}
	log := b.log.With().Str("task_id", taskID).Logger()
	if rec != nil {
		log = b.runLogger(rec.Meta)
	}
	var last time.Time
	st := dispatch.RunStatus{State: dispatch.StateRunning}
	for {
		var ferr error
		if st.State != dispatch.StatePending {
			last, ferr = b.follow(ctx, log, name, last, progress)
		}
		if st, err = b.Status(ctx, taskID); err != nil {
			return st, err
		}
		if st.State == dispatch.StateLost || st.State.Ended() {
			return st, nil
		}
		if ferr != nil && ctx.Err() == nil {
			log.Warn().Err(ferr).Msg("following the sandbox log failed; retrying")
		}
		select {
		case <-ctx.Done():
			return dispatch.RunStatus{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// follow streams the log from after `since` until it ends, and returns the
// time of the last line seen.
func (b *watcher) follow(ctx context.Context, log zerolog.Logger, name string, since time.Time, progress func(dispatch.Progress)) (time.Time, error) {
	args := []string{"logs", "--follow", "--timestamps"}
	if !since.IsZero() {
		args = append(args, "--since", since.Format(time.RFC3339Nano))
	}
	cmd := exec.CommandContext(ctx, b.cli.bin, append(args, name)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return since, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return since, err
	}
	if err := cmd.Start(); err != nil {
		return since, fmt.Errorf("docker logs %s: %w", name, err)
	}
	var (
		mu     sync.Mutex
		latest = since
		wg     sync.WaitGroup
		tail   bytes.Buffer // the CLI's own complaints end up after the container's stderr
	)
	seen := func(t time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		// --since is inclusive; lines at or before the resume point were
		// handled by the previous follow.
		if !since.IsZero() && !t.After(since) {
			return true
		}
		if t.After(latest) {
			latest = t
		}
		return false
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		scanLines(stdout, func(t time.Time, line []byte) {
			if seen(t) {
				return
			}
			if p, ok := dispatch.ParseProgress(line); ok && progress != nil {
				progress(p)
			}
		})
	}()
	scanLines(stderr, func(t time.Time, line []byte) {
		if t.IsZero() {
			tail.Reset()
			tail.Write(line)
			return
		}
		if seen(t) {
			return
		}
		// The init's and runner's own logs; kept at debug level in the
		// bot's log under the task id.
		log.Debug().Bytes("line", line).Msg("sandbox")
	})
	wg.Wait()
	err = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err != nil && ctx.Err() == nil {
		return latest, fmt.Errorf("docker logs %s: %v: %s", name, err, tail.String())
	}
	return latest, ctx.Err()
}

// scanLines splits `--timestamps` output into the time and the line. A
// line without a timestamp (an error of the CLI itself) gets the zero time.
func scanLines(r io.Reader, fn func(time.Time, []byte)) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			var t time.Time
			if i := bytes.IndexByte(line, ' '); i > 0 {
				if ts, perr := time.Parse(time.RFC3339Nano, string(line[:i])); perr == nil {
					t, line = ts, line[i+1:]
				}
			}
			fn(t, line)
		}
		// EOF or a closed pipe: the CLI has exited, and Wait reports why.
		if err != nil {
			return
		}
	}
}
