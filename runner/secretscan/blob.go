package secretscan

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
)

// Bounds of what the scan holds of one blob, one patch fragment or one
// commit object. A blob is read as a stream, never whole: its first
// MaxBlobBytes are scanned in chunks of chunkBytes, each starting with
// the last overlapBytes (whole lines) of the one before, so that a match
// across a cut (a private key block, a keyword and the value on the next
// line) is whole in one of them.
const (
	// MaxBlobBytes is how much of one blob (or one commit object) is
	// read; the rest is counted, not scanned (Result.Cut names the
	// blobs cut).
	MaxBlobBytes = 32 << 20
	// TextBlobBytes is the largest blob git shows as text in the patch
	// the runner reads (core.bigFileThreshold): a larger one is shown as
	// binary and streamed through ScanBlob, so no patch fragment is
	// larger.
	TextBlobBytes = 8 << 20
	chunkBytes    = 1 << 20
	overlapBytes  = 16 << 10
	// minRun is the shortest run of printable bytes kept from a binary
	// file (strings(1) keeps 4): every credential a rule knows is longer.
	minRun = 8
	// sniffBytes is git's own binary test: a NUL in the first 8000 bytes.
	sniffBytes = 8000
)

// chunker cuts a stream of text into fragments of about chunkBytes that
// end at a line end where one is near, each beginning with the tail of the
// one before (see overlapBytes). It keeps at most MaxBlobBytes of what is
// written; the rest is counted.
type chunker struct {
	base fragment
	emit func(fragment)
	buf  []byte
	line int // line number of buf[0]
	kept int64
	// next is where the part of buf not yet in an emitted fragment starts.
	next int
}

func newChunker(base fragment, emit func(fragment)) *chunker {
	if base.start == 0 {
		base.start = 1
	}
	return &chunker{base: base, emit: emit, line: base.start}
}

// Write implements io.Writer; it never fails.
func (c *chunker) Write(p []byte) (int, error) {
	n := len(p)
	if room := MaxBlobBytes - c.kept; int64(len(p)) > room {
		p = p[:max(room, 0)]
	}
	c.kept += int64(len(p))
	for len(p) > 0 {
		take := min(len(p), chunkBytes-len(c.buf))
		c.buf = append(c.buf, p[:take]...)
		p = p[take:]
		if len(c.buf) >= chunkBytes {
			c.cut()
		}
	}
	return n, nil
}

// cut emits a full buffer up to its last line end (all of it when it is
// one long line) and keeps the overlap and the rest.
func (c *chunker) cut() {
	end := bytes.LastIndexByte(c.buf, '\n') + 1
	if end <= c.next {
		end = len(c.buf)
	}
	c.send(c.buf[:end])
	// The next fragment starts at the first line start within the last
	// overlapBytes of this one, or at its end when a line is that long.
	from := max(end-overlapBytes, 0)
	if from > 0 {
		if i := bytes.IndexByte(c.buf[from:end], '\n'); i >= 0 {
			from += i + 1
		} else {
			from = end
		}
	}
	c.line += bytes.Count(c.buf[:from], []byte{'\n'})
	rest := copy(c.buf, c.buf[from:])
	c.buf = c.buf[:rest]
	c.next = end - from
}

func (c *chunker) send(b []byte) {
	if len(b) == 0 {
		return
	}
	f := c.base
	f.raw, f.start = string(b), c.line
	c.emit(f)
}

// Close emits what is left.
func (c *chunker) Close() error {
	if len(c.buf) > c.next {
		c.send(c.buf)
	}
	c.buf = nil
	return nil
}

// runs turns binary content into its runs of at least minRun printable
// ASCII bytes (and tabs), one a line, the way strings(1) reads a binary
// file, and writes them to w.
type runs struct {
	w   io.Writer
	run []byte
}

func (r *runs) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\t' || (b >= 0x20 && b < 0x7f) {
			r.run = append(r.run, b)
			if len(r.run) < chunkBytes {
				continue
			}
		}
		if err := r.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (r *runs) flush() error {
	if len(r.run) >= minRun {
		r.run = append(r.run, '\n')
		if _, err := r.w.Write(r.run); err != nil {
			return err
		}
	}
	r.run = r.run[:0]
	return nil
}

// BlobScan is what ScanBlob read of a blob.
type BlobScan struct {
	// Binary says the blob looked binary (a NUL in its first 8000
	// bytes): its printable runs were scanned.
	Binary bool
	// Cut says the blob is larger than MaxBlobBytes: its rest was not
	// scanned.
	Cut bool
}

// ScanBlob scans a file's content as it is read from r, holding at most a
// few chunks of it at once: text as it is, line by line, and a
// binary-looking file's printable runs (whose findings carry no line).
// Every line counts as added; compare the findings with the file's old
// content with WithoutIn.
func (s *Scanner) ScanBlob(ctx context.Context, commit, path string, r io.Reader) ([]Finding, BlobScan, error) {
	var st BlobScan
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, st, err
	}
	head = head[:n]
	st.Binary = looksBinary(head)
	ch := make(chan fragment)
	found := s.scanAll(ctx, ch)
	c := newChunker(fragment{commit: commit, path: path, binary: st.Binary}, func(f fragment) { ch <- f })
	var w io.Writer = c
	rs := &runs{w: c}
	if st.Binary {
		w = rs
	}
	_, _ = w.Write(head)
	// One byte past the bound tells a cut blob from one of exactly
	// MaxBlobBytes; the chunker keeps no more than the bound.
	m, err := io.Copy(w, io.LimitReader(r, MaxBlobBytes-int64(n)+1))
	if st.Binary {
		_ = rs.flush()
	}
	_ = c.Close()
	close(ch)
	out := dedupe(found())
	for i := range out {
		if out[i].binary {
			// A line of the printable runs is no line of the file.
			out[i].Line = 0
		}
	}
	st.Cut = int64(n)+m > MaxBlobBytes
	if err != nil {
		return nil, st, err
	}
	return out, st, ctx.Err()
}

// dedupe drops the findings a chunk's overlap found twice.
func dedupe(fs []Finding) []Finding {
	type key struct {
		commit, path, rule, secret string
		line                       int
	}
	seen := map[key]bool{}
	return slices.DeleteFunc(fs, func(f Finding) bool {
		k := key{f.Commit, f.File, f.Rule, f.secret, f.Line}
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}

// WithoutIn is Without for old content read from r, as a stream: the
// findings whose secret the first MaxBlobBytes of r hold are dropped.
func WithoutIn(found []Finding, r io.Reader) ([]Finding, error) {
	longest := 0
	for _, f := range found {
		longest = max(longest, len(f.secret))
	}
	if longest == 0 {
		return found, nil
	}
	old := map[string]bool{}
	buf := make([]byte, 0, chunkBytes+longest)
	lr := io.LimitReader(r, MaxBlobBytes)
	for {
		n, err := io.ReadFull(lr, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		for _, f := range found {
			if f.secret != "" && bytes.Contains(buf, []byte(f.secret)) {
				old[f.secret] = true
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return found, err
		}
		// Keep the tail a secret could start in.
		keep := copy(buf, buf[len(buf)-(longest-1):])
		buf = buf[:keep]
	}
	return slices.DeleteFunc(slices.Clone(found), func(f Finding) bool { return old[f.secret] }), nil
}
