package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// ArtifactsDir is where a task run's agent works and leaves its results,
// below the work order's OutputDir. The bot publishes what it finds there.
const ArtifactsDir = "artifacts"

// Default artifact caps: a task's results are reports and small files, and
// everything read is held in the bot's memory until it is on GitHub.
const (
	DefaultArtifactFileCap  = 5 << 20
	DefaultArtifactTotalCap = 20 << 20
	DefaultArtifactMaxFiles = 100
	// maxArtifactDepth bounds how deep the walk goes: a hostile sandbox
	// could nest directories until the bot runs out of stack or patience.
	maxArtifactDepth = 32
)

// ArtifactCaps bound what the bot takes of a task run's artifacts.
type ArtifactCaps struct {
	// FileBytes is the largest file taken; larger ones are skipped.
	FileBytes int64
	// TotalBytes is the most taken in all; a file that would pass it is
	// skipped (files are taken in path order).
	TotalBytes int64
	// MaxFiles is the most files taken (each is one write on GitHub).
	MaxFiles int
}

// DefaultArtifactCaps are the caps a server without settings uses.
func DefaultArtifactCaps() ArtifactCaps {
	return ArtifactCaps{FileBytes: DefaultArtifactFileCap, TotalBytes: DefaultArtifactTotalCap, MaxFiles: DefaultArtifactMaxFiles}
}

// Validate names a cap that is not positive.
func (c ArtifactCaps) Validate() error {
	switch {
	case c.FileBytes <= 0:
		return fmt.Errorf("artifact per-file cap %d is not a positive number of bytes", c.FileBytes)
	case c.TotalBytes <= 0:
		return fmt.Errorf("artifact total cap %d is not a positive number of bytes", c.TotalBytes)
	case c.MaxFiles <= 0:
		return fmt.Errorf("artifact file count cap %d is not positive", c.MaxFiles)
	}
	return nil
}

// Artifact is one file taken from the artifacts directory.
type Artifact struct {
	// Path is slash-separated, relative to the artifacts directory.
	Path string
	Data []byte
}

// SkippedArtifact is an entry of the artifacts directory the bot left
// out, and why. Path is the sandbox's name for it: untrusted text.
type SkippedArtifact struct {
	Path   string
	Size   int64
	Reason string
}

// Reasons an artifact is skipped.
const (
	SkipSymlink    = "symbolic link"
	SkipNotRegular = "not a regular file"
	SkipFileCap    = "over the per-file cap"
	SkipTotalCap   = "over the total cap"
	SkipMaxFiles   = "over the file count cap"
	SkipBadName    = "name git cannot store"
	SkipTooDeep    = "nested too deep"
	SkipChanged    = "changed while read"
)

// Artifacts is what the bot took of a run's artifacts directory.
type Artifacts struct {
	Files   []Artifact
	Skipped []SkippedArtifact
}

// Bytes is the size of the files taken.
func (a *Artifacts) Bytes() int64 {
	var n int64
	for _, f := range a.Files {
		n += int64(len(f.Data))
	}
	return n
}

// ArtifactReader is implemented by backends that can hand the bot a task
// run's artifacts once it has ended. The sandbox wrote them: the reader
// follows no link, reads only regular files below the artifacts directory
// and stops at the caps. A run without an artifacts directory has none
// (no error).
type ArtifactReader interface {
	Artifacts(ctx context.Context, taskID string, caps ArtifactCaps) (*Artifacts, error)
}

// ArtifactEntry is one directory entry as an ArtifactSource reports it,
// without following links.
type ArtifactEntry struct {
	Name string
	Size int64
	Mode fs.FileMode
}

// ArtifactSource is a directory tree a backend reads artifacts from: a
// directory on this machine, or an allocation's files on a Nomad client.
// Names are slash-separated and relative to the artifacts directory.
type ArtifactSource interface {
	// ReadDir lists dir ("." is the top) without following links.
	ReadDir(ctx context.Context, dir string) ([]ArtifactEntry, error)
	// ReadFile reads at most max+1 bytes of name, which must be a regular
	// file; reading more than max tells the caller it grew.
	ReadFile(ctx context.Context, name string, max int64) ([]byte, error)
}

// CollectArtifacts walks src in path order and takes every regular file
// within caps. Links, devices, pipes and sockets, names git cannot store,
// and files over a cap are skipped and listed; nothing is followed out of
// the tree.
func CollectArtifacts(ctx context.Context, src ArtifactSource, caps ArtifactCaps) (*Artifacts, error) {
	if err := caps.Validate(); err != nil {
		return nil, err
	}
	c := &collector{src: src, caps: caps, out: &Artifacts{}}
	if err := c.walk(ctx, ".", 0); err != nil {
		return nil, err
	}
	return c.out, nil
}

type collector struct {
	src   ArtifactSource
	caps  ArtifactCaps
	out   *Artifacts
	total int64
	seen  int
	// stopped ends the walk once it has seen too many entries.
	stopped bool
}

// maxSkipped bounds the skipped list: a sandbox that leaves a million
// links gets a count, not a million lines.
const maxSkipped = 200

func (c *collector) skip(p string, size int64, reason string) {
	if len(c.out.Skipped) < maxSkipped {
		c.out.Skipped = append(c.out.Skipped, SkippedArtifact{Path: p, Size: size, Reason: reason})
	}
}

func (c *collector) walk(ctx context.Context, dir string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := c.src.ReadDir(ctx, dir)
	if errors.Is(err, errNotRegular) && dir != "." {
		// Listed as a directory, and a link or a file by the time it was
		// opened.
		c.skip(dir, 0, SkipChanged)
		return nil
	}
	if err != nil {
		return fmt.Errorf("list artifacts directory %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	for _, e := range entries {
		p := path.Join(dir, e.Name)
		// Every entry counts, directories and skipped ones too, so a tree
		// of a million empty directories ends the walk early.
		c.seen++
		if c.seen > 10*c.caps.MaxFiles {
			c.skip(p+" and what follows", 0, SkipMaxFiles)
			c.stopped = true
		}
		if c.stopped {
			return nil
		}
		if !ValidArtifactName(e.Name) {
			c.skip(p, e.Size, SkipBadName)
			continue
		}
		switch {
		case e.Mode&fs.ModeSymlink != 0:
			c.skip(p, e.Size, SkipSymlink)
		case e.Mode.IsDir():
			if depth+1 >= maxArtifactDepth {
				c.skip(p, 0, SkipTooDeep)
				continue
			}
			if err := c.walk(ctx, p, depth+1); err != nil {
				return err
			}
		case !e.Mode.IsRegular():
			c.skip(p, e.Size, SkipNotRegular)
		case len(c.out.Files) >= c.caps.MaxFiles:
			c.skip(p, e.Size, SkipMaxFiles)
		case e.Size > c.caps.FileBytes:
			c.skip(p, e.Size, SkipFileCap)
		case c.total+e.Size > c.caps.TotalBytes:
			c.skip(p, e.Size, SkipTotalCap)
		default:
			if err := c.take(ctx, p, e.Size); err != nil {
				return err
			}
		}
	}
	return nil
}

// take reads one file, capped at what its listing said (and the caps): a
// file that grew, or turned into something else, is skipped.
func (c *collector) take(ctx context.Context, p string, size int64) error {
	data, err := c.src.ReadFile(ctx, p, size)
	if errors.Is(err, errNotRegular) {
		c.skip(p, size, SkipNotRegular)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read artifact %s: %w", p, err)
	}
	if int64(len(data)) > size {
		c.skip(p, int64(len(data)), SkipChanged)
		return nil
	}
	c.total += int64(len(data))
	c.out.Files = append(c.out.Files, Artifact{Path: p, Data: data})
	return nil
}

// ValidArtifactName reports whether a directory entry's name can be a path
// component of a git tree on GitHub: not empty, ".", ".." or ".git" (git
// refuses those in any case), valid UTF-8 without NUL, control
// characters or a backslash, at most 255 bytes.
func ValidArtifactName(name string) bool {
	if name == "" || name == "." || name == ".." || strings.EqualFold(name, ".git") || len(name) > 255 || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return false
		}
	}
	return true
}

// errNotRegular: the entry is not what its listing said once opened (a
// file swapped for a link, a pipe or a device; a directory for a link).
var errNotRegular = errors.New("not a regular file")
