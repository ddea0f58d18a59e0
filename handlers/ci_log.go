package handlers

import (
	"bufio"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
)

// An Actions job's log is one text for all its steps, each line stamped
// with its time; the step that failed ends with a `##[error]` line, after
// which come the job's own clean-up steps. The fix run is given the lines
// up to the last such line, as many as fit in its bound: the failing
// command's output and its error, not the checkout or the clean-up.

// maxLogLine keeps one log line's end when it is longer (a minified
// bundle, a progress bar on one line).
const maxLogLine = 4096

// maxLogRead bounds how much of a log is read at all.
const maxLogRead = 64 << 20

var logStamp = regexp.MustCompile(`^\x{feff}?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z ?`)

// logTail reads a job's log from r and returns its tail before the last
// error line, at most max bytes of whole lines (terminal escapes and time
// stamps removed), and the log's size.
func logTail(r io.Reader, max int) (string, int64, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxLogRead), 64<<10)
	var ring []string
	held, size := 0, int64(0)
	var atError []string
	for {
		raw, err := br.ReadString('\n')
		size += int64(len(raw))
		if raw != "" {
			line := logStamp.ReplaceAllString(strings.TrimRight(raw, "\r\n"), "")
			line = termtext.Clean(line)
			if len(line) > maxLogLine {
				line = "…" + line[len(line)-maxLogLine:]
			}
			ring = append(ring, line)
			held += len(line) + 1
			for held > max && len(ring) > 1 {
				held -= len(ring[0]) + 1
				ring = ring[1:]
			}
			if strings.Contains(line, "##[error]") {
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
	tail := strings.Join(lines, "\n")
	if len(tail) > max {
		tail = tail[len(tail)-max:]
	}
	return strings.ToValidUTF8(tail, ""), size, nil
}

// cleanText is text from GitHub or a check without terminal escapes or
// other control characters.
func cleanText(s string) string { return termtext.Clean(s) }
