package sandboxinit

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/imagecache"
)

// imageCache is the sandbox's view of the image cache: dir, the cache of
// its repository (or installation), which this init writes, and seed, the
// operator's images (docker backend CacheImage), mounted read-only. Every
// entry is checked against the image ID recorded beside it before it is
// loaded, and once more after: a file someone changed is refused, not run.
type imageCache struct {
	dir  string // "" means no cache
	seed string // "" means no seed images
	log  zerolog.Logger
	// pulled holds the IDs of images this start pulled, recorded before
	// the agent runs, so that what is saved later is what was pulled even
	// if the agent re-tags an image in between.
	pulled *sync.Map
}

// Where the docker backend mounts the operator's seed images.
const seedImagesDir = "images-seed"

func newImageCache(cacheDir string, log zerolog.Logger) imageCache {
	c := imageCache{log: log, pulled: &sync.Map{}}
	if dir := filepath.Join(cacheDir, "images"); isDir(dir) {
		c.dir = dir
		c.sweep()
	}
	if seed := filepath.Join(cacheDir, seedImagesDir); isDir(seed) {
		c.seed = seed
	}
	return c
}

func (c imageCache) path(ref string) string { return dispatch.CachedImageFile(c.dir, ref) }

// refs lists the references the cache and the seeds hold.
func (c imageCache) refs() []string {
	var refs []string
	seen := map[string]bool{}
	for _, dir := range []string{c.dir, c.seed} {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, dispatch.CacheTmpPrefix) || !strings.HasSuffix(n, ".tar") {
				continue
			}
			if ref, err := url.QueryUnescape(strings.TrimSuffix(n, ".tar")); err == nil && !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// load loads ref from the cache, or else from the seeds, after checking
// the tarball against its recorded ID. It reports false without an error
// when neither holds ref.
func (c imageCache) load(ctx context.Context, e engine, ref string) (bool, error) {
	var refused []string
	for _, dir := range []string{c.dir, c.seed} {
		if dir == "" {
			continue
		}
		p := dispatch.CachedImageFile(dir, ref)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		err := c.loadVerified(ctx, e, dir, ref)
		if err == nil {
			return true, nil
		}
		c.log.Warn().Err(err).Str("image", ref).Str("file", p).Msg("image cache: entry refused")
		refused = append(refused, err.Error())
	}
	if len(refused) > 0 {
		return false, fmt.Errorf("image cache: %s", strings.Join(refused, "; "))
	}
	return false, nil
}

func (c imageCache) loadVerified(ctx context.Context, e engine, dir, ref string) error {
	id, err := imagecache.VerifyFile(dir, ref)
	if err != nil {
		return err
	}
	p := dispatch.CachedImageFile(dir, ref)
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := e.loadImage(ctx, f, p); err != nil {
		return fmt.Errorf("load %s: %w", p, err)
	}
	// The file was checked before the daemon read it; the engine's own
	// answer closes the gap of a file replaced in between.
	got, err := e.imageID(ctx, ref)
	if err != nil || got != id {
		_ = e.removeImage(ctx, ref)
		return fmt.Errorf("%s loaded as %s, not the recorded %s", ref, got, id)
	}
	return nil
}

// recordPulled notes the ID of an image just pulled.
func (c imageCache) recordPulled(ctx context.Context, e engine, ref string) {
	if c.dir == "" || c.pulled == nil {
		return
	}
	id, err := e.imageID(ctx, ref)
	if err != nil {
		c.log.Warn().Err(err).Str("image", ref).Msg("image cache: pulled image not found; it will not be cached")
		return
	}
	c.pulled.Store(ref, id)
}

// save writes a pulled image into the cache, if it is still the image that
// was pulled.
func (c imageCache) save(ctx context.Context, docker dockerCLI, ref string) error {
	if c.dir == "" {
		return nil
	}
	var id string
	if c.pulled != nil {
		if v, ok := c.pulled.Load(ref); ok {
			id = v.(string)
		}
	}
	if id == "" {
		return fmt.Errorf("image cache: no ID was recorded when %s was pulled, so it is not cached", ref)
	}
	return imagecache.Save(ctx, docker.run, c.dir, ref, id)
}

// sweep removes temporary files old enough that no live sandbox is still
// writing them.
func (c imageCache) sweep() {
	if c.dir == "" {
		return
	}
	old, _ := filepath.Glob(filepath.Join(c.dir, dispatch.CacheTmpPrefix+"*"))
	for _, p := range old {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > time.Hour {
			if os.Remove(p) == nil {
				c.log.Info().Str("file", p).Msg("image cache: removed a temporary file a killed sandbox left")
			}
		}
	}
}
