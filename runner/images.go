package runner

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"

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

// imageSet is the work order's images on their way to the agent, a value
// of its own: what the order holds, the harness that takes them, and the
// receipt's report of them.
type imageSet struct {
	order []dispatch.Image
	h     harness.Harness
	res   *dispatch.Result
	red   *Redactor
	log   zerolog.Logger
	// given are the images as written (nil until then); dir where.
	given []harness.Image
	dir   string
}

// forAgent are the images for the agent, written once per run; the
// receipt says how many it was given, or why none.
func (s *imageSet) forAgent() []harness.Image {
	if len(s.order) == 0 {
		return nil
	}
	if s.given != nil {
		return s.given
	}
	report := &dispatch.ImagesReport{}
	s.res.Images = report
	if t, ok := s.h.(harness.ImageTaker); !ok || !t.TakesImages() {
		report.Note = fmt.Sprintf("the %s harness takes no images", s.h.Name())
		s.given = []harness.Image{}
		return nil
	}
	imgs, err := s.write()
	if err != nil {
		report.Note = "the images could not be handed over: " + s.red.String(err.Error())
		s.log.Warn().Err(err).Msg("images not handed to the agent")
		s.given = []harness.Image{}
		return nil
	}
	report.Given, s.given = len(imgs), imgs
	return imgs
}

// write checks each image's bytes again and writes it to a fresh
// directory the runner owns (0755, files 0644, created exclusively).
func (s *imageSet) write() ([]harness.Image, error) {
	dir, err := os.MkdirTemp("", "sandbox-images-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	var out []harness.Image
	for i, img := range s.order {
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
	s.log.Info().Int("images", len(out)).Msg("images for the agent")
	return out, nil
}

// remove removes the images' directory once the run is over.
func (s *imageSet) remove() {
	if s != nil && s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
