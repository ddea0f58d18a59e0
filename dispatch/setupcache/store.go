// Package setupcache is the per-repository setup cache: what a project's
// lifecycle.setup produced (node_modules, .venv, ...) saved as one
// zstd-compressed tar per key beside a manifest, so a later run of the same
// repository whose key matches restores it instead of running setup again.
//
// The format is shared by the runner (which saves and restores entries of
// its own repository) and the hosts that keep the cache (the docker
// backend and the sandbox's init on Nomad, which bound it in size). An
// entry is complete when its manifest exists: the archive is written and
// renamed first, the manifest last. A restore hashes the archive before it
// reads a byte of it and refuses an entry whose digest or size differs from
// its manifest. The last use of an entry is its manifest's modification
// time, which a restore renews: eviction removes the least recently used
// entries first.
package setupcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Version is the entry format; a manifest of another version is a miss.
const Version = 1

// Suffixes of an entry's two files.
const (
	archiveSuffix  = ".tar.zst"
	manifestSuffix = ".json"
)

// maxManifest bounds a manifest read into memory.
const maxManifest = 64 << 10

// keyPattern is what Key returns: file names made from it need no escaping.
var keyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Manifest describes one entry.
type Manifest struct {
	Version int    `json:"version"`
	Key     string `json:"key"`
	// Repo is the repository (owner/name, lower case) whose run saved it;
	// a restore in any other repository refuses it.
	Repo string `json:"repo"`
	// Commit is the base branch's commit setup ran on.
	Commit string `json:"commit"`
	// Paths are the saved paths, relative to the checkout.
	Paths []string `json:"paths"`
	Setup []string `json:"setup"`
	// Size and SHA256 are the archive's, as written.
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// Store is one repository's cache directory.
type Store struct {
	Dir string
	// MaxBytes bounds the directory's entries; past it the least recently
	// used ones are removed after a save. 0 means no bound.
	MaxBytes int64
	// MaxEntryBytes bounds one archive; a save that grows past it stops
	// and leaves nothing. 0 means MaxBytes.
	MaxEntryBytes int64
}

// ErrMiss is a key the store holds no complete entry for.
var ErrMiss = errors.New("no cache entry for this key")

// CorruptError is an entry refused on restore; the entry is removed.
type CorruptError struct {
	Key    string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("setup cache entry %.12s refused: %s", e.Key, e.Reason)
}

func (s *Store) archive(key string) string  { return filepath.Join(s.Dir, key+archiveSuffix) }
func (s *Store) manifest(key string) string { return filepath.Join(s.Dir, key+manifestSuffix) }

// Lookup reads the manifest of key. A manifest that does not read, or that
// names another key, version or repository, is corrupt.
func (s *Store) Lookup(key, repo string) (Manifest, error) {
	var m Manifest
	if !keyPattern.MatchString(key) {
		return m, fmt.Errorf("setup cache: %q is not a key", key)
	}
	b, err := readRegular(s.manifest(key), maxManifest)
	if errors.Is(err, os.ErrNotExist) {
		return m, ErrMiss
	}
	if err != nil {
		return m, &CorruptError{Key: key, Reason: err.Error()}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, &CorruptError{Key: key, Reason: "manifest: " + err.Error()}
	}
	switch {
	case m.Version != Version:
		return m, ErrMiss
	case m.Key != key:
		return m, &CorruptError{Key: key, Reason: fmt.Sprintf("manifest names key %.12s", m.Key)}
	case m.Repo != strings.ToLower(repo):
		return m, &CorruptError{Key: key, Reason: fmt.Sprintf("saved by repository %q, not %q", m.Repo, strings.ToLower(repo))}
	}
	return m, nil
}

// Restore checks the entry of key (manifest, size, digest) and then writes
// its tar stream to w. A corrupt entry is removed and reported as a
// *CorruptError before anything is written to w.
func (s *Store) Restore(key, repo string, w io.Writer) (Manifest, error) {
	m, err := s.Lookup(key, repo)
	if err != nil {
		s.dropIfCorrupt(key, err)
		return m, err
	}
	f, err := openRegular(s.archive(key))
	if err != nil {
		err = &CorruptError{Key: key, Reason: "archive: " + err.Error()}
		s.dropIfCorrupt(key, err)
		return m, err
	}
	defer f.Close()
	// The digest is checked on the open file before it is decoded, and the
	// decoder reads the same file: what is checked is what is restored.
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return m, fmt.Errorf("setup cache: read %s: %w", f.Name(), err)
	}
	if n != m.Size || hex.EncodeToString(h.Sum(nil)) != m.SHA256 {
		err := &CorruptError{Key: key, Reason: fmt.Sprintf("the archive (%d bytes) does not match the digest its manifest recorded (%d bytes, sha256 %.12s)", n, m.Size, m.SHA256)}
		s.dropIfCorrupt(key, err)
		return m, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return m, err
	}
	dec, err := zstd.NewReader(f)
	if err != nil {
		return m, err
	}
	defer dec.Close()
	if _, err := io.Copy(w, dec); err != nil {
		return m, fmt.Errorf("setup cache: decompress entry %.12s: %w", key, err)
	}
	now := time.Now()
	_ = os.Chtimes(s.manifest(key), now, now) // last use, for eviction
	return m, nil
}

func (s *Store) dropIfCorrupt(key string, err error) {
	var c *CorruptError
	if errors.As(err, &c) {
		s.remove(key)
	}
}

func (s *Store) remove(key string) {
	_ = os.Remove(s.manifest(key))
	_ = os.Remove(s.archive(key))
}

// ErrTooLarge is a save whose archive grew past the entry bound.
var ErrTooLarge = errors.New("setup cache: the archive is larger than the bound of one entry")

// Save compresses the tar stream r into the entry of m.Key, records its
// size and digest in the manifest and then bounds the directory. Nothing of
// a save that fails stays behind.
func (s *Store) Save(m Manifest, r io.Reader) (Manifest, error) {
	if !keyPattern.MatchString(m.Key) {
		return m, fmt.Errorf("setup cache: %q is not a key", m.Key)
	}
	tmp, err := os.CreateTemp(s.Dir, dispatch.CacheTmpPrefix+"*"+archiveSuffix)
	if err != nil {
		return m, fmt.Errorf("setup cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	limit := s.MaxEntryBytes
	if limit <= 0 {
		limit = s.MaxBytes
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(tmp, h), limit: limit}
	enc, err := zstd.NewWriter(cw, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		tmp.Close()
		return m, err
	}
	_, cerr := io.Copy(enc, r)
	if err := errors.Join(cerr, enc.Close(), tmp.Sync(), tmp.Close()); err != nil {
		if cw.over {
			return m, ErrTooLarge
		}
		return m, fmt.Errorf("setup cache: write entry %.12s: %w", m.Key, err)
	}
	m.Version, m.Size, m.SHA256 = Version, cw.n, hex.EncodeToString(h.Sum(nil))
	m.Repo = strings.ToLower(m.Repo)
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	if err := os.Rename(tmp.Name(), s.archive(m.Key)); err != nil {
		return m, fmt.Errorf("setup cache: %w", err)
	}
	if err := writeFileAtomic(s.manifest(m.Key), m); err != nil {
		_ = os.Remove(s.archive(m.Key))
		return m, err
	}
	if s.MaxBytes > 0 {
		_, _ = Evict([]string{s.Dir}, s.MaxBytes)
	}
	return m, nil
}

type countingWriter struct {
	w     io.Writer
	n     int64
	limit int64
	over  bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.limit > 0 && c.n+int64(len(p)) > c.limit {
		c.over = true
		return 0, ErrTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), dispatch.CacheTmpPrefix+"*"+manifestSuffix)
	if err != nil {
		return fmt.Errorf("setup cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("setup cache: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("setup cache: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// openRegular opens path for reading without following a symbolic link at
// its end and refuses anything but a regular file.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

func readRegular(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
