package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// queueFormat heads an encoded queue. The queue is read and written whole
// on every submission, so it is one line per entry, tab-separated, which
// decodes several times faster than JSON at a thousand entries.
const queueFormat = "sandbox-bot-queue/1\n"

// ApplyQueueChange runs a Queue.UpdateQueue change on cur and encodes its
// result for the store to write; write=false when the change returned
// ErrQueueUnchanged (nothing to write).
func ApplyQueueChange(cur []QueueEntry, change func([]QueueEntry) ([]QueueEntry, error)) (data []byte, write bool, err error) {
	next, err := change(cur)
	if errors.Is(err, ErrQueueUnchanged) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	data, err = EncodeQueue(next)
	return data, err == nil, err
}

// EncodeQueue writes q in the stores' format.
func EncodeQueue(q []QueueEntry) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(queueFormat) + 80*len(q))
	buf.WriteString(queueFormat)
	for _, e := range q {
		if strings.ContainsAny(e.TaskID, "\t\n") || strings.ContainsAny(e.Repo, "\t\n") || e.TaskID == "" {
			return nil, fmt.Errorf("queue entry %q of %q: task id and repository must be set and hold no tab or newline", e.TaskID, e.Repo)
		}
		buf.WriteString(e.TaskID)
		buf.WriteByte('\t')
		buf.WriteString(e.Repo)
		for _, n := range []int64{int64(e.Number), e.InstallationID, e.EnqueuedAt, e.ClaimedAt} {
			buf.WriteByte('\t')
			buf.WriteString(strconv.FormatInt(n, 10))
		}
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// DecodeQueue reads what EncodeQueue wrote; empty data is an empty queue.
func DecodeQueue(data []byte) ([]QueueEntry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(queueFormat))
	if !ok {
		return nil, fmt.Errorf("queue: not in format %q", strings.TrimSpace(queueFormat))
	}
	q := make([]QueueEntry, 0, bytes.Count(rest, []byte{'\n'}))
	// Many entries share a repository: one string each.
	repos := map[string]string{}
	var f [6][]byte
	for line := 1; len(rest) > 0; line++ {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		n := 0
		for ; n < len(f) && l != nil; n++ {
			var ok bool
			if f[n], l, ok = bytes.Cut(l, []byte{'\t'}); !ok {
				l = nil
			}
		}
		if n != len(f) || l != nil {
			return nil, fmt.Errorf("queue entry %d: want 6 tab-separated fields", line)
		}
		var v [4]int64
		for i := range v {
			x, err := strconv.ParseInt(string(f[2+i]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("queue entry %d: %w", line, err)
			}
			v[i] = x
		}
		repo, ok := repos[string(f[1])]
		if !ok {
			repo = string(f[1])
			repos[repo] = repo
		}
		q = append(q, QueueEntry{TaskID: string(f[0]), Repo: repo, Number: int(v[0]), InstallationID: v[1], EnqueuedAt: v[2], ClaimedAt: v[3]})
	}
	return q, nil
}
