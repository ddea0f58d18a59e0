// Package cilog reads the tail of a failing CI job's log for a CI fix run:
// bounded, cleaned of terminal escapes, the lines that matter kept.
package cilog

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
)

// An Actions job's log is one text for all its steps, each line stamped
// with its time; a step starts with a `##[group]Run …` line, and the step
// that failed ends with a `##[error]` line, after which come the job's own
// clean-up steps. The fix run is given the failing step's lines up to the
// last such line, as many as fit in its bound (its end): the failing
// command's output and its error, not the earlier steps or the clean-up.

// maxLogLine keeps one log line's end when it is longer (a minified
// bundle, a progress bar on one line).
const maxLogLine = 4096

// maxLogRead bounds how much of a log is read at all.
const maxLogRead = 64 << 20

// unstamp drops the time stamp Actions puts before each line
// ("2026-11-27T10:00:00.1234567Z "), and a byte order mark before it.
func unstamp(line []byte) []byte {
	line = bytes.TrimPrefix(line, []byte("\ufeff"))
	if len(line) < 20 || line[4] != '-' || line[7] != '-' || line[10] != 'T' || line[13] != ':' {
		return line
	}
	end := bytes.IndexByte(line[:min(len(line), 40)], 'Z')
	if end < 19 {
		return line
	}
	return bytes.TrimPrefix(line[end+1:], []byte(" "))
}

// logTail reads a job's log from r and returns the failing step's lines
// up to the last error line, at most max bytes of whole lines from their
// end (terminal escapes and time stamps removed), and the log's size.
func Tail(r io.Reader, max int) (string, int64, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxLogRead), 64<<10)
	// The ring holds the raw lines of the current step, within the bound
	// (raw lines are no shorter than clean ones); only the lines kept are
	// cleaned, at the end.
	var ring, atError []string
	held, size := 0, int64(0)
	for {
		raw, err := br.ReadSlice('\n')
		size += int64(len(raw))
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: keep its end.
			for errors.Is(err, bufio.ErrBufferFull) {
				raw, err = br.ReadSlice('\n')
				size += int64(len(raw))
			}
		}
		if len(raw) > 0 {
			line := unstamp(bytes.TrimRight(raw, "\r\n"))
			if len(line) > maxLogLine {
				line = line[len(line)-maxLogLine:]
			}
			if bytes.Contains(line, []byte("##[group]Run ")) {
				ring, held = ring[:0], 0 // a step starts: the earlier ones are not the failing one
			}
			ring = append(ring, string(line))
			held += len(line) + 1
			for held > max && len(ring) > 1 {
				held -= len(ring[0]) + 1
				ring = ring[1:]
			}
			if bytes.Contains(line, []byte("##[error]")) {
				atError = append(atError[:0], ring...)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", size, err
		}
	}
	lines := ring
	if atError != nil {
		lines = atError
	}
	for i, l := range lines {
		lines[i] = termtext.Clean(l)
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > max {
		tail = tail[len(tail)-max:]
	}
	return strings.ToValidUTF8(tail, ""), size, nil
}
