package app

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// ImagesConfig bounds the pictures a run is given (the and the
// feedback's, fetched by the bot from GitHub) and says which hosts they
// are fetched from. Sizes are "2MiB", "512KiB" or a number of bytes.
type ImagesConfig struct {
	// MaxCount is the most images a run is given (SANDBOX_IMAGES_MAX_COUNT;
	// 0 gives none).
	MaxCount *int `yaml:"max_count"`
	// MaxSize is the largest image (SANDBOX_IMAGES_MAX_SIZE).
	MaxSize string `yaml:"max_size"`
	// MaxTotalSize is the most image bytes of a run together
	// (SANDBOX_IMAGES_MAX_TOTAL_SIZE): they travel in its work order, and
	// the Nomad backend carries at most 512KiB of them in a job.
	MaxTotalSize string `yaml:"max_total_size"`
	// Hosts are the host[:port]s images are fetched from
	// (SANDBOX_IMAGE_HOSTS, comma-separated); by default GitHub's own,
	// from GITHUB_WEB_URL (github.com's attachment hosts, or a GitHub
	// Enterprise Server's host and its media. subdomain).
	Hosts []string `yaml:"hosts"`
}

// Defaults of the images a run is given.
const (
	DefaultImagesMaxCount = 5
	DefaultImageMaxSize   = 3 << 20
	DefaultImagesMaxTotal = 8 << 20
	// DefaultCILogTail is what a CI fix run is given of each failing
	// Actions job's log, at most (SANDBOX_CI_LOG_TAIL).
	DefaultCILogTail = 8 << 10
)

// settings applies the environment over the file and the defaults, and
// makes the handlers' settings; webURL is GitHub's web address.
func (c *ImagesConfig) settings(getenv Getenv, webURL string) (handlers.ImageSettings, error) {
	s := handlers.ImageSettings{MaxCount: DefaultImagesMaxCount, MaxBytes: DefaultImageMaxSize, MaxTotal: DefaultImagesMaxTotal}
	if v, ok := getenv("SANDBOX_IMAGES_MAX_COUNT"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return s, fmt.Errorf("SANDBOX_IMAGES_MAX_COUNT: %q is not a whole number (0 gives runs no images)", v)
		}
		c.MaxCount = &n
	}
	if c.MaxCount != nil {
		if *c.MaxCount < 0 {
			return s, fmt.Errorf("images.max_count: %d is negative", *c.MaxCount)
		}
		s.MaxCount = *c.MaxCount
	}
	for _, f := range []struct {
		name, env string
		value     *string
		dst       *int64
	}{
		{"images.max_size", "SANDBOX_IMAGES_MAX_SIZE", &c.MaxSize, &s.MaxBytes},
		{"images.max_total_size", "SANDBOX_IMAGES_MAX_TOTAL_SIZE", &c.MaxTotalSize, &s.MaxTotal},
	} {
		if v, ok := getenv(f.env); ok {
			*f.value = v
		}
		if strings.TrimSpace(*f.value) == "" {
			continue
		}
		n, err := humanize.ParseBytes(*f.value)
		if err != nil || n == 0 || n > 1<<30 {
			return s, fmt.Errorf("%s (%s): %q is not a size such as 2MiB", f.name, f.env, *f.value)
		}
		*f.dst = int64(n)
	}
	if v, ok := getenv("SANDBOX_IMAGE_HOSTS"); ok {
		c.Hosts = splitList(v)
	}
	s.Hosts, s.PlainHTTP = handlers.DefaultImageHosts(webURL)
	if len(c.Hosts) > 0 {
		s.Hosts = nil
		for _, h := range c.Hosts {
			h = strings.ToLower(strings.TrimSpace(h))
			if h == "" || strings.ContainsAny(h, "/?#@ ") {
				return s, fmt.Errorf("images.hosts (SANDBOX_IMAGE_HOSTS): %q is not a host or host:port", h)
			}
			s.Hosts = append(s.Hosts, h)
		}
	}
	if u, err := url.Parse(webURL); err == nil && u.Scheme == "http" {
		s.PlainHTTP = []string{strings.ToLower(u.Host)}
	}
	return s, nil
}

// loadGitHubReads settles what the bot reads from GitHub for the agent
// besides text: the images (images:) and the CI log tail (ci_log_tail).
func (c *Config) loadGitHubReads(getenv Getenv) error {
	s, err := c.Images.settings(getenv, c.GitHub.WebURL)
	if err != nil {
		return err
	}
	c.Settings.Images, c.CILogBytes = s, DefaultCILogTail
	if v, ok := getenv("SANDBOX_CI_LOG_TAIL"); ok {
		c.CILogTail = v
	}
	if strings.TrimSpace(c.CILogTail) != "" {
		n, err := humanize.ParseBytes(c.CILogTail)
		if err != nil || n < 256 || n > 1<<20 {
			return fmt.Errorf("ci_log_tail (SANDBOX_CI_LOG_TAIL): %q is not a size between 256 bytes and 1MiB, such as 8KiB", c.CILogTail)
		}
		c.CILogBytes = int(n)
	}
	return nil
}
