package testenv

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"testing"
)

// Get fetches url with c as a browser would and returns the response (its
// body read and closed), the body, and the informational (1xx) status
// codes that came before it: what a test of a proxy's answers looks at.
func Get(t testing.TB, c *http.Client, url string) (resp *http.Response, body string, early []int) {
	t.Helper()
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { early = append(early, code); return nil }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), early
}
