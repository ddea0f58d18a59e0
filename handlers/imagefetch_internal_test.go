package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// The hosts images come from: github.com's attachment hosts, or a GitHub
// Enterprise Server's own host and its media host; nothing else, never
// with credentials in the address, https unless GitHub itself is http.
func TestImagesComeFromGitHubsHostsAlone(t *testing.T) {
	t.Parallel()
	hosts, plain := DefaultImageHosts("https://github.com")
	if !slices.Contains(hosts, "private-user-images.githubusercontent.com") || len(plain) != 0 || slices.Contains(hosts, "camo.githubusercontent.com") {
		t.Errorf("github.com: %v %v", hosts, plain)
	}
	ghes, plain := DefaultImageHosts("http://ghe.corp.example:8080")
	if !slices.Equal(ghes, []string{"ghe.corp.example:8080", "media.ghe.corp.example:8080"}) || !slices.Equal(plain, ghes) {
		t.Errorf("GHES: %v %v", ghes, plain)
	}
	s := ImageSettings{Hosts: hosts}
	for raw, want := range map[string]string{
		"https://private-user-images.githubusercontent.com/1/2.png?jwt=x": "",
		"https://github.com:443/user-attachments/assets/1":                "",
		"https://evil.example/x.png":                                      "is not one of GitHub's",
		"http://github.com/x.png":                                         "not https",
		"https://user:pw@github.com/x.png":                                "credentials",
		"https://github.com.evil.example/x.png":                           "is not one of GitHub's",
	} {
		u, _ := url.Parse(raw)
		if got := s.allowed(u); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
}

// A GitHub host that redirects elsewhere does not take the bot there, and
// the bot sends no credential to any of them.
func TestImageRedirectOutsideGitHubIsNotFollowed(t *testing.T) {
	t.Parallel()
	var outside atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { outside.Add(1) }))
	t.Cleanup(evil.Close)
	var auth atomic.Value
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		http.Redirect(w, r, evil.URL+"/x.png", http.StatusFound)
	}))
	t.Cleanup(gh.Close)
	host := strings.TrimPrefix(gh.URL, "http://")
	s := ImageSettings{MaxCount: 1, MaxBytes: 1 << 20, MaxTotal: 1 << 20, Hosts: []string{host}, PlainHTTP: []string{host}}
	b := agentRun{c: &core{Wiring: &Wiring{Settings: Settings{Images: s}}, imageClient: newImageClient(s)}}
	_, _, _, why := b.fetchImage(context.Background(), gh.URL+"/private-user-images/1.png?jwt=secret", s, s.MaxTotal)
	if why != "it could not be fetched" || outside.Load() != 0 {
		t.Errorf("why %q, requests outside %d", why, outside.Load())
	}
	if a, _ := auth.Load().(string); a != "" {
		t.Errorf("the bot sent Authorization %q", a)
	}
}

// The bytes of what was refused count toward a run's total: non-images of
// 40 KiB against a 100 KiB total: two read whole, the third only as far as
// the total leaves room, the fourth not asked for.
func TestRefusedBytesCountTowardTheTotal(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(strings.Repeat("not a picture ", 40<<10/14+1)))
	}))
	t.Cleanup(gh.Close)
	host := strings.TrimPrefix(gh.URL, "http://")
	s := ImageSettings{MaxCount: 5, MaxBytes: 64 << 10, MaxTotal: 100 << 10, Hosts: []string{host}, PlainHTTP: []string{host}}
	f := &imageFetches{a: agentRun{c: &core{Wiring: &Wiring{Settings: Settings{Images: s}}, imageClient: newImageClient(s)}}, caps: s}
	for i := range 4 {
		f.take(context.Background(), markers.ImageNote{Name: "image " + string(rune('1'+i))}, gh.URL+"/x.png")
	}
	if requests.Load() != 3 || f.total > 100<<10+1 || len(f.notes) != 4 || !strings.Contains(f.notes[3].Why, "over the 100 KiB of images") {
		t.Errorf("%d requests, %d bytes counted, notes %+v", requests.Load(), f.total, f.notes)
	}
}
