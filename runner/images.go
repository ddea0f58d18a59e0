package runner

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// The work order's images (the screenshots, the bot fetched and
// checked them) go to the agent with the first prompt of a fresh session:
// Claude Code takes their bytes on stdin, OpenCode opens files, which the
// runner writes into a directory of its own that the agent may read and
// not write (so what OpenCode attaches is exactly what the bot sent, and
// nothing the agent could not read anyway). A resumed session has them
// already.

// agentImages are the images for the agent, written once per run; the
// receipt says how many it was given, or why none.
func (r *run) agentImages() []harness.Image {
	if len(r.order.Images) == 0 {
		return nil
	}
	if r.images != nil {
		return r.images
	}
	report := &dispatch.ImagesReport{}
	r.res.Images = report
	if t, ok := r.h.(harness.ImageTaker); !ok || !t.TakesImages() {
		report.Note = fmt.Sprintf("the %s harness takes no images", r.h.Name())
		r.images = []harness.Image{}
		return nil
	}
	imgs, err := r.writeImages()
	if err != nil {
		report.Note = "the images could not be handed over: " + r.red.String(err.Error())
		r.log.Warn().Err(err).Msg("images not handed to the agent")
		r.images = []harness.Image{}
		return nil
	}
	report.Given, r.images = len(imgs), imgs
	return imgs
}

// writeImages checks each image's bytes again and writes it to a fresh
// directory the runner owns (0755, files 0644, created exclusively).
func (r *run) writeImages() ([]harness.Image, error) {
	dir, err := os.MkdirTemp("", "sandbox-images-")
	if err != nil {
		return nil, err
	}
	r.imageDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	var out []harness.Image
	for i, img := range r.order.Images {
		typ := http.DetectContentType(img.Data)
		if typ != img.MediaType || !slices.Contains(dispatch.ImageMediaTypes, typ) {
			return nil, fmt.Errorf("image %d's bytes are %s, not the %s the work order says", i+1, typ, img.MediaType)
		}
		p := filepath.Join(dir, fmt.Sprintf("image-%d.%s", i+1, typ[len("image/"):]))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, err
		}
		_, werr := f.Write(img.Data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, werr
		}
		out = append(out, harness.Image{Path: p, MediaType: typ, Data: img.Data})
	}
	r.log.Info().Int("images", len(out)).Msg("images for the agent")
	return out, nil
}

// removeImages removes the images' directory once the run is over.
func (r *run) removeImages() {
	if r.imageDir != "" {
		os.RemoveAll(r.imageDir)
	}
}
