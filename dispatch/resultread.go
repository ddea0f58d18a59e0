package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxResultBytes caps result.json. A real receipt is a few KiB (output
// tails are cut by the runner); the cap keeps a hostile sandbox from
// making the bot read without end (a link to /dev/zero, a sparse file).
const MaxResultBytes = 1 << 20

// ErrBadResult: the run left a result.json the bot refuses to read (a
// link, not a regular file, over MaxResultBytes, or not exactly the
// schema). Unlike ErrNoResult it is final: the run is reported as failed,
// not continued.
var ErrBadResult = errors.New("result.json rejected")

// ReadResultFile reads rel (slash-separated, below root) the way every
// backend must treat the sandbox's output: as untrusted. No component
// below root may be a symbolic link (the last one is opened with
// O_NOFOLLOW, and os.Root keeps even a link swapped in meanwhile from
// leaving root), the file must be a regular file (O_NONBLOCK: a FIFO
// cannot hang the bot), and at most MaxResultBytes are read. root itself
// is the bot's own task directory and is trusted.
func ReadResultFile(root, rel string) (*Result, error) {
	f, err := openOutputFile(root, rel, MaxResultBytes, ErrBadResult)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := DecodeResult(f)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", root, rel, err)
	}
	return res, nil
}

// DecodeResult reads at most MaxResultBytes from rd and decodes them
// strictly: unknown fields, trailing data and another schema version are
// errors. Every error wraps ErrBadResult.
func DecodeResult(rd io.Reader) (*Result, error) {
	raw, err := io.ReadAll(io.LimitReader(rd, MaxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ResultFile, err)
	}
	if len(raw) > MaxResultBytes {
		return nil, fmt.Errorf("%s is over the %d-byte cap: %w", ResultFile, MaxResultBytes, ErrBadResult)
	}
	return ParseResult(raw)
}

// ParseResult decodes result.json strictly and checks its schema version.
func ParseResult(b []byte) (*Result, error) {
	if len(b) > MaxResultBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte cap: %w", ResultFile, len(b), MaxResultBytes, ErrBadResult)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode %s: %w: %w", ResultFile, ErrBadResult, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("decode %s: data after the JSON object: %w", ResultFile, ErrBadResult)
	}
	if r.SchemaVersion != ResultVersion {
		return nil, fmt.Errorf("%s schema_version %d is not supported (want %d): %w", ResultFile, r.SchemaVersion, ResultVersion, ErrBadResult)
	}
	if !r.Status.Known() {
		return nil, fmt.Errorf("%s status %q is not a known status: %w", ResultFile, r.Status, ErrBadResult)
	}
	r.CleanText()
	return &r, nil
}

// Known reports whether s is one of the statuses a run can end with.
func (s Status) Known() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusInterrupted, StatusTimeout, StatusBudgetExceeded, StatusHung:
		return true
	}
	return false
}
