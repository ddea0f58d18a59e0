package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// redactingMiddleware is the last net under everything the bot sends to
// GitHub (comments, PR bodies, check-run output): every request body is
// redacted of the secrets. It also learns each installation token the App
// mints (sandbox tokens and their refreshes) from the minting response, so
// no code path that mints one can forget to register it.
func redactingMiddleware(secrets *sanitize.Secrets) githubapp.ClientMiddleware {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Body != nil && req.Body != http.NoBody {
				raw, err := io.ReadAll(req.Body)
				req.Body.Close()
				if err != nil {
					return nil, err
				}
				red := []byte(secrets.Redact(string(raw)))
				req = req.Clone(req.Context())
				req.Body = io.NopCloser(bytes.NewReader(red))
				req.ContentLength = int64(len(red))
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(red)), nil }
			}
			resp, err := next.RoundTrip(req)
			if err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/access_tokens") || resp.StatusCode != http.StatusCreated {
				return resp, err
			}
			raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			if rerr != nil {
				return resp, nil
			}
			var tok struct {
				Token     string    `json:"token"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			if json.Unmarshal(raw, &tok) == nil && tok.Token != "" {
				secrets.AddToken(tok.Token, tok.ExpiresAt)
			}
			return resp, nil
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
