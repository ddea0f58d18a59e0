package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// ArtifactsPath is the run's artifacts directory as AllocFS addresses it.
const ArtifactsPath = "alloc/data/" + dispatch.ArtifactsDir

// artifacts read what an ended run left in its allocation's artifacts
// directory (dispatch.ArtifactReader).
type artifacts struct {
	*shared
}

// Artifacts implements dispatch.ArtifactReader through the client's file
// API: fs ls describes entries without following links (the client lstats
// them) and only what it calls a regular file is read, with fs cat,
// capped. The artifacts directory itself must be a directory, not a link.
func (b *artifacts) Artifacts(ctx context.Context, taskID string, caps dispatch.ArtifactCaps) (*dispatch.Artifacts, error) {
	v, err := b.endedView(ctx, "artifacts", taskID)
	if err != nil {
		return nil, err
	}
	a := v.latest()
	if a == nil {
		return &dispatch.Artifacts{}, nil
	}
	src := &allocArtifacts{cl: b.cluster, alloc: &api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace}}
	top, err := src.list(ctx, path.Dir(ArtifactsPath))
	if err != nil {
		if errors.Is(err, errNoSuchPath) {
			return &dispatch.Artifacts{}, nil
		}
		return nil, fmt.Errorf("artifacts of %s (allocation %s): %w", taskID, a.ID, err)
	}
	for _, e := range top {
		if e.Name != dispatch.ArtifactsDir {
			continue
		}
		if !e.Mode.IsDir() {
			return &dispatch.Artifacts{Skipped: []dispatch.SkippedArtifact{{Path: ".", Size: e.Size, Reason: dispatch.SkipNotRegular}}}, nil
		}
		arts, err := dispatch.CollectArtifacts(ctx, src, caps)
		if err != nil {
			return nil, fmt.Errorf("artifacts of %s (allocation %s): %w", taskID, a.ID, err)
		}
		return arts, nil
	}
	return &dispatch.Artifacts{}, nil
}

// allocArtifacts is an allocation's artifacts directory on its Nomad
// client, as a dispatch.ArtifactSource.
type allocArtifacts struct {
	cl    *cluster
	alloc *api.Allocation
}

var errNoSuchPath = errors.New("no such file or directory")

func (s *allocArtifacts) list(ctx context.Context, dir string) ([]dispatch.ArtifactEntry, error) {
	infos, _, err := s.cl.c.AllocFS().List(s.alloc, dir, s.cl.qopts(ctx))
	if err != nil {
		if isNotFound(err) || strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "Unknown allocation") {
			return nil, fmt.Errorf("%s: %w", dir, errNoSuchPath)
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	out := make([]dispatch.ArtifactEntry, 0, len(infos))
	for _, fi := range infos {
		out = append(out, dispatch.ArtifactEntry{Name: fi.Name, Size: fi.Size, Mode: allocFileMode(fi)})
	}
	return out, nil
}

// ReadDir implements dispatch.ArtifactSource.
func (s *allocArtifacts) ReadDir(ctx context.Context, dir string) ([]dispatch.ArtifactEntry, error) {
	return s.list(ctx, path.Join(ArtifactsPath, dir))
}

// ReadFile implements dispatch.ArtifactSource: whatever the client
// serves, no more than max+1 bytes are read.
func (s *allocArtifacts) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	rc, err := s.cl.c.AllocFS().Cat(s.alloc, path.Join(ArtifactsPath, name), s.cl.qopts(ctx))
	if err != nil {
		return nil, fmt.Errorf("cat %s: %w", name, err)
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, max+1))
}

// allocFileMode reads the type of an entry from its FileMode, which the
// client prints with os.FileMode.String: "-" starts a regular file, "d" a
// directory, "L" a link. Anything else (devices, pipes, setuid files) is
// irregular and never read.
func allocFileMode(fi *api.AllocFileInfo) fs.FileMode {
	switch {
	case fi.FileMode == "":
		return fs.ModeIrregular
	case fi.FileMode[0] == 'L':
		return fs.ModeSymlink
	case fi.IsDir && fi.FileMode[0] == 'd':
		return fs.ModeDir
	case fi.FileMode[0] == '-' && !fi.IsDir:
		return 0
	}
	return fs.ModeIrregular
}
