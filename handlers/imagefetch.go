package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of the formats an image may have
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// ImageSettings bound the images a run is given and say where the bot
// fetches them from.
type ImageSettings struct {
	// MaxCount images per run (0: none); MaxBytes each; MaxTotal all of a
	// run's together (the work order carries them).
	MaxCount int
	MaxBytes int64
	MaxTotal int64
	// Hosts are the host[:port]s the bot fetches images from: GitHub's
	// (github.com's attachment hosts, or a GitHub Enterprise Server's own
	// host and its media host). An address anywhere else is never asked.
	Hosts []string
	// PlainHTTP are hosts of Hosts that may answer over http (GitHub
	// Enterprise or a test whose GITHUB_WEB_URL is http); the rest need
	// https.
	PlainHTTP []string
}

// DefaultImageHosts are the hosts GitHub serves attachments from, for a
// GitHub at webURL: github.com's image hosts, or a GitHub Enterprise
// Server's own host and its media subdomain.
func DefaultImageHosts(webURL string) (hosts, plainHTTP []string) {
	u, err := url.Parse(webURL)
	if err != nil || u.Host == "" {
		return nil, nil
	}
	host := strings.ToLower(u.Host)
	if host == "github.com" || host == "www.github.com" {
		return []string{"github.com", "user-images.githubusercontent.com", "private-user-images.githubusercontent.com",
			"github-production-user-asset-6210df.s3.amazonaws.com"}, nil
	}
	hosts = []string{host}
	if name := u.Hostname(); net.ParseIP(name) == nil {
		hosts = append(hosts, "media."+host)
	}
	if u.Scheme == "http" {
		plainHTTP = hosts
	}
	return hosts, plainHTTP
}

// imageFetchTimeout bounds one image's fetch, redirects included.
const imageFetchTimeout = 30 * time.Second

// allowed says why u is not an address the bot fetches images from, or "".
func (s ImageSettings) allowed(u *url.URL) string {
	host := strings.ToLower(u.Host)
	switch {
	case u.User != nil:
		return "its address carries credentials"
	case !slices.Contains(s.Hosts, host) && !slices.Contains(s.Hosts, strings.TrimSuffix(host, ":443")):
		return "its host " + u.Hostname() + " is not one of GitHub's"
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && slices.Contains(s.PlainHTTP, host):
		return ""
	}
	return "its address is not https"
}

// newImageClient is the client images are fetched with: it sends no
// credential (a signed URL carries its own) and follows a redirect only
// to an address the bot would fetch from anyway.
func newImageClient(s ImageSettings) *http.Client {
	return &http.Client{
		Timeout:   imageFetchTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: imageFetchTimeout},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("more than 3 redirects")
			}
			if why := s.allowed(req.URL); why != "" {
				return errors.New("redirected to an address it does not fetch from: " + why)
			}
			return nil
		},
	}
}

// imageCaps are the settings' caps, the total lowered to what the
// backend carries in a run's work order.
func (a agentRun) imageCaps() ImageSettings {
	caps := a.c.Images
	if c, ok := a.c.Backend.(dispatch.ImageCarrier); ok && c.MaxImageBytes() < caps.MaxTotal {
		caps.MaxTotal = c.MaxImageBytes()
	}
	return caps
}

// fetchImage fetches the image at raw when the caps and the hosts allow,
// with room bytes left of the run's total: the image, or why not; the
// bytes it read, and whether it made a request at all.
func (a agentRun) fetchImage(ctx context.Context, raw string, caps ImageSettings, room int64) (img dispatch.Image, read int64, tried bool, why string) {
	u, err := url.Parse(raw)
	if err != nil {
		return dispatch.Image{}, 0, false, "its address does not parse"
	}
	if why := caps.allowed(u); why != "" {
		return dispatch.Image{}, 0, false, "not fetched: " + why
	}
	where := u.Host + u.Path // never the query: a signed URL's signature is in it
	log := zerolog.Ctx(ctx).With().Str("image", where).Logger()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return dispatch.Image{}, 0, false, "its address does not parse"
	}
	req.Header.Set("Accept", strings.Join(dispatch.ImageMediaTypes, ", "))
	resp, err := a.c.imageClient.Do(req)
	if err != nil {
		log.Info().Err(hub.ScrubURLError(err)).Msg("image not fetched")
		return dispatch.Image{}, 0, true, "it could not be fetched"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return dispatch.Image{}, 0, true, fmt.Sprintf("GitHub answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	limit := min(caps.MaxBytes, max(room, 0))
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	read = int64(len(data))
	switch {
	case err != nil:
		log.Info().Err(hub.ScrubURLError(err)).Msg("image not read whole")
		return dispatch.Image{}, read, true, "it could not be read whole"
	case read > caps.MaxBytes:
		return dispatch.Image{}, read, true, fmt.Sprintf("larger than %s", byteSize(caps.MaxBytes))
	case read > room:
		return dispatch.Image{}, read, true, fmt.Sprintf("over the %s of images a run is given", byteSize(caps.MaxTotal))
	}
	typ := imageType(data)
	if typ == "" {
		return dispatch.Image{}, read, true, "its bytes are not a PNG, JPEG, GIF or WebP image"
	}
	log.Debug().Str("type", typ).Int("bytes", len(data)).Msg("image fetched")
	return dispatch.Image{MediaType: typ, Data: data}, read, true, ""
}

// imageType is the media type data's bytes say, when it is one an image
// may have (and, for the formats Go reads, its header decodes): "" else.
func imageType(data []byte) string {
	typ := http.DetectContentType(data)
	if !slices.Contains(dispatch.ImageMediaTypes, typ) {
		return ""
	}
	if typ != "image/webp" {
		if _, _, err := image.DecodeConfig(bytes.NewReader(data)); err != nil {
			return ""
		}
	}
	return typ
}

// byteSize is n for people: "2 MiB", "512 KiB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
