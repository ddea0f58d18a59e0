package handlers

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"
)

// postRetryMax caps the wait between tries to post a run's result: GitHub
// outages and rate limits pass; the run and its lock are kept meanwhile.
const postRetryMax = 2 * time.Minute

// untilPosted tries post (waiting first, then twice as long each time)
// until it succeeds, fails for good, or the bot
// stops (a restart reconciles the run and tries again). Posting a result
// is idempotent through the task's markers, so a retry never duplicates a
// comment or a PR.
func untilPosted(ctx context.Context, log *zerolog.Logger, first time.Duration, post func() error) error {
	wait := first
	for {
		err := post()
		if err == nil || !transientGitHubError(err) || ctx.Err() != nil {
			return err
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg("post result: GitHub refused for now; trying again")
		if !pause(ctx, wait) {
			return err
		}
		wait = min(2*wait, postRetryMax)
	}
}

// transientGitHubError reports whether GitHub may accept the same request
// later: rate limits, server errors, timeouts, a connection that failed.
// A 401, 403, 404, 410 or 422 (access gone, the issue gone, the request
// wrong) will not, nor will an error of the bot's own.
func transientGitHubError(err error) bool {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return true
	}
	var resp *github.ErrorResponse
	if errors.As(err, &resp) && resp.Response != nil {
		code := resp.Response.StatusCode
		return code >= 500 || code == http.StatusTooManyRequests
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// pause waits d, or less if ctx ends first; it reports whether it waited
// the whole time (the retry loops' one way of waiting).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
