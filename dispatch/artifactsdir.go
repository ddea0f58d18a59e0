package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Reading what a sandbox left on this machine (the docker and process
// backends): below the bot's own task directory, which is trusted,
// everything is the sandbox's, so no link is followed and every open is
// confined (os.Root).

var (
	errLinkBelow   = errors.New("is a symbolic link; the bot does not follow links the sandbox made")
	errNotDirBelow = errors.New("is not a directory")
)

// openBelow opens root and walks rel (slash-separated, below root) with
// lstat: every component must exist (else fs.ErrNotExist), none may be a
// link (errLinkBelow), and all but the last must be directories
// (errNotDirBelow). It returns the opened root, rel cleaned and the last
// component's description; a missing root is ErrNotFound.
func openBelow(root, rel string) (*os.Root, string, fs.FileInfo, error) {
	rel = path.Clean(rel)
	if path.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, "", nil, fmt.Errorf("path %q is not below %s", rel, root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil, fmt.Errorf("%s: %w", root, ErrNotFound)
		}
		return nil, "", nil, fmt.Errorf("open task directory %s: %w", root, err)
	}
	parts := strings.Split(rel, "/")
	var fi fs.FileInfo
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		if fi, err = r.Lstat(p); err != nil {
			r.Close()
			return nil, "", nil, fmt.Errorf("%s/%s: %w", root, p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			r.Close()
			return nil, "", nil, fmt.Errorf("%s/%s %w", root, p, errLinkBelow)
		}
		if i < len(parts)-1 && !fi.IsDir() {
			r.Close()
			return nil, "", nil, fmt.Errorf("%s/%s %w", root, p, errNotDirBelow)
		}
	}
	return r, rel, fi, nil
}

// DirArtifacts reads artifacts from a directory on this machine. The
// directory itself belongs to the bot's task directory; everything below
// it is the sandbox's, so every open is confined to it (os.Root) and the
// last component is never followed (O_NOFOLLOW).
type DirArtifacts struct{ root *os.Root }

// Close releases the directory.
func (d *DirArtifacts) Close() error { return d.root.Close() }

// ReadDir implements ArtifactSource.
func (d *DirArtifacts) ReadDir(_ context.Context, dir string) ([]ArtifactEntry, error) {
	f, err := d.root.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return nil, errNotRegular
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	list, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]ArtifactEntry, 0, len(list))
	for _, e := range list {
		ent := ArtifactEntry{Name: e.Name(), Mode: e.Type()}
		// Lstat, not Info through a link: the size of what is there.
		if fi, err := d.root.Lstat(path.Join(dir, e.Name())); err == nil {
			ent.Size, ent.Mode = fi.Size(), fi.Mode()
		}
		out = append(out, ent)
	}
	return out, nil
}

// ReadFile implements ArtifactSource: O_NOFOLLOW so a link swapped in is
// refused, O_NONBLOCK so a pipe cannot hang the bot, and a regular-file
// check on what was opened.
func (d *DirArtifacts) ReadFile(_ context.Context, name string, max int64) ([]byte, error) {
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errNotRegular
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

// ReadArtifacts collects the artifacts of a run on this machine: rel
// (slash-separated, e.g. out/artifacts) below root, the bot's own task
// directory, which is trusted. No component of rel may be a link (the
// sandbox could point its artifacts directory anywhere on the host); a
// run that left no artifacts directory has none.
func ReadArtifacts(ctx context.Context, root, rel string, caps ArtifactCaps) (*Artifacts, error) {
	r, rel, fi, err := openBelow(root, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Artifacts{}, nil
	case errors.Is(err, errLinkBelow):
		return &Artifacts{Skipped: []SkippedArtifact{{Path: ".", Reason: SkipSymlink}}}, nil
	case errors.Is(err, errNotDirBelow):
		return &Artifacts{Skipped: []SkippedArtifact{{Path: ".", Reason: SkipNotRegular}}}, nil
	case err != nil:
		return nil, err
	}
	defer r.Close()
	if !fi.IsDir() {
		return &Artifacts{Skipped: []SkippedArtifact{{Path: ".", Size: fi.Size(), Reason: SkipNotRegular}}}, nil
	}
	sub, err := r.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("open artifacts directory %s/%s: %w", root, rel, err)
	}
	src := &DirArtifacts{root: sub}
	defer src.Close()
	return CollectArtifacts(ctx, src, caps)
}
