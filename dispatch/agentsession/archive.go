// Package agentsession is the format of the archive that carries an agent
// session from a plan run to the run that executes the plan: a gzipped tar
// of exactly two regular files, the manifest (session.json) and the
// harness's own export of the session (session.data). The runner writes it
// in the plan sandbox and reads it in the execute sandbox; the bot only
// reads the manifest. Both treat it as untrusted input: anything else in
// the archive, or anything over the caps, is refused.
package agentsession

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
)

// Version is bumped on any incompatible change of the archive.
const Version = 1

// MaxDataBytes caps the uncompressed session data, so a small archive
// cannot inflate without end.
const MaxDataBytes = 32 << 20

const (
	manifestName    = "session.json"
	dataName        = "session.data"
	maxManifestSize = 64 << 10
)

// ErrTooBig: the archive would pass dispatch.MaxSessionArchiveBytes.
var ErrTooBig = errors.New("session archive over the size cap")

// ErrBad: the archive is not one this package wrote.
var ErrBad = errors.New("session archive rejected")

// Manifest says what the session is and where it was made.
type Manifest struct {
	Version int    `json:"version"`
	TaskID  string `json:"task_id"` // the plan run
	Harness string `json:"harness"`
	ID      string `json:"id"`
	Model   string `json:"model,omitempty"`
	// Dir is the checkout the session was made in: a harness rewrites it
	// to the checkout it is restored in.
	Dir string `json:"dir"`
	// BaseSHA is the base branch's commit the plan saw.
	BaseSHA string `json:"base_sha,omitempty"`
	// RepoID is the repository the plan run worked on (GitHub's id, which
	// a rename or transfer keeps), and PlanSHA256 the PlanDigest of the plan
	// it wrote: an execute run resumes the session only in that repository
	// and only for that plan, as approved.
	RepoID     int64  `json:"repo_id,omitempty"`
	PlanSHA256 string `json:"plan_sha256,omitempty"`
}

// PlanDigest is the digest that binds a session to its plan: of the plan's
// text as a receipt carries it (terminal escapes stripped) and without the
// space around it. The runner records it in the archive, the bot in the
// plan comment's marker, from the same text.
func PlanDigest(plan string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(termtext.Clean(plan))))
	return hex.EncodeToString(sum[:])
}

// Encode builds the archive of m and data, or ErrTooBig.
func Encode(m Manifest, data []byte) ([]byte, error) {
	if len(data) > MaxDataBytes {
		return nil, fmt.Errorf("session data is %d bytes, over the %d-byte cap: %w", len(data), MaxDataBytes, ErrTooBig)
	}
	m.Version = Version
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode session manifest: %w", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		body []byte
	}{{manifestName, mb}, {dataName, data}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("write session archive: %w", err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("write session archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write session archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("write session archive: %w", err)
	}
	if buf.Len() > dispatch.MaxSessionArchiveBytes {
		return nil, fmt.Errorf("session archive is %d bytes compressed, over the %d-byte cap: %w", buf.Len(), dispatch.MaxSessionArchiveBytes, ErrTooBig)
	}
	return buf.Bytes(), nil
}

// Decode checks archive and returns its manifest and data. It refuses an
// archive over the caps, any entry but the two regular files it writes
// (links, directories, devices, other names such as ../x), duplicates, and
// a manifest of another version.
func Decode(archive []byte) (Manifest, []byte, error) {
	var m Manifest
	if len(archive) > dispatch.MaxSessionArchiveBytes {
		return m, nil, fmt.Errorf("%d bytes, over the %d-byte cap: %w", len(archive), dispatch.MaxSessionArchiveBytes, ErrBad)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return m, nil, fmt.Errorf("not gzip: %w: %w", ErrBad, err)
	}
	tr := tar.NewReader(zr)
	var manifest, data []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m, nil, fmt.Errorf("not a tar archive: %w: %w", ErrBad, err)
		}
		if h.Typeflag != tar.TypeReg {
			return m, nil, fmt.Errorf("entry %q is not a regular file (type %q): %w", h.Name, h.Typeflag, ErrBad)
		}
		var dst *[]byte
		limit := int64(0)
		switch h.Name {
		case manifestName:
			dst, limit = &manifest, maxManifestSize
		case dataName:
			dst, limit = &data, MaxDataBytes
		default:
			return m, nil, fmt.Errorf("unexpected entry %q: %w", h.Name, ErrBad)
		}
		if *dst != nil {
			return m, nil, fmt.Errorf("entry %q twice: %w", h.Name, ErrBad)
		}
		if h.Size > limit {
			return m, nil, fmt.Errorf("entry %q is %d bytes, over the %d-byte cap: %w", h.Name, h.Size, limit, ErrBad)
		}
		b, err := io.ReadAll(io.LimitReader(tr, limit+1))
		if err != nil {
			return m, nil, fmt.Errorf("read entry %q: %w: %w", h.Name, ErrBad, err)
		}
		if int64(len(b)) > limit {
			return m, nil, fmt.Errorf("entry %q is over the %d-byte cap: %w", h.Name, limit, ErrBad)
		}
		*dst = b
	}
	if manifest == nil || data == nil {
		return m, nil, fmt.Errorf("missing %s or %s: %w", manifestName, dataName, ErrBad)
	}
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, nil, fmt.Errorf("manifest: %w: %w", ErrBad, err)
	}
	if m.Version != Version {
		return m, nil, fmt.Errorf("manifest version %d, want %d: %w", m.Version, Version, ErrBad)
	}
	if m.Harness == "" || m.ID == "" || m.Dir == "" {
		return m, nil, fmt.Errorf("manifest lacks harness, id or dir: %w", ErrBad)
	}
	return m, data, nil
}
