package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
)

const (
	openAIKey    = "sk-canary-openai-0123456789"
	anthropicKey = "sk-ant-canary-abcdefghij"
)

// seen is what an upstream received.
type seen struct {
	Path, Query, Body string
	Header            http.Header
}

type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(b), Header: r.Header.Clone()})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

func (u *upstream) last(t *testing.T) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

func serve(t *testing.T, providers ...dispatch.GatewayProvider) *gateway.Server {
	t.Helper()
	g, err := gateway.New(dispatch.GatewayConfig{Providers: providers}, gateway.Options{Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := gateway.Serve(ctx, g, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, method, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serveBoth is a gateway with an OpenAI-compatible provider "oa" (base
// URL ending in /v1) and an Anthropic one "an", each with its upstream.
func serveBoth(t *testing.T) (oa, an *upstream, gw *gateway.Server) {
	oa, an = newUpstream(t), newUpstream(t)
	gw = serve(t,
		dispatch.GatewayProvider{Name: "oa", BaseURL: oa.URL + "/v1", API: dispatch.APIOpenAI, Key: openAIKey},
		dispatch.GatewayProvider{Name: "an", BaseURL: an.URL, API: dispatch.APIAnthropic, Key: anthropicKey},
	)
	return oa, an, gw
}

// Each provider gets its own auth header with its key; whatever credential
// the client sent (the dummy key, or anything an agent tries) is dropped.
func TestRoutesAddTheProvidersKey(t *testing.T) {
	t.Parallel()
	oa, an, gw := serveBoth(t)

	code, body := do(t, "POST", gw.URL+"/oa/chat/completions?stream=1", map[string]string{
		"Authorization": "Bearer " + dispatch.GatewayDummyKey, "X-Api-Key": "agent-set", "Cookie": "c=1", "Content-Type": "application/json",
	}, `{"model":"m"}`)
	if code != 200 || !strings.Contains(body, `"/v1/chat/completions"`) {
		t.Fatalf("openai route: %d %s", code, body)
	}
	got := oa.last(t)
	if got.Path != "/v1/chat/completions" || got.Query != "stream=1" || got.Body != `{"model":"m"}` {
		t.Errorf("openai upstream saw %s?%s body %q", got.Path, got.Query, got.Body)
	}
	if a := got.Header.Get("Authorization"); a != "Bearer "+openAIKey {
		t.Errorf("openai upstream Authorization = %q", a)
	}
	for _, h := range []string{"X-Api-Key", "Cookie"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("openai upstream got the client's %s: %q", h, v)
		}
	}

	code, body = do(t, "POST", gw.URL+"/an/v1/messages", map[string]string{
		"X-Api-Key": dispatch.GatewayDummyKey, "Authorization": "Bearer agent-set", "Anthropic-Version": "2023-06-01",
	}, `{}`)
	if code != 200 {
		t.Fatalf("anthropic route: %d %s", code, body)
	}
	got = an.last(t)
	if got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != anthropicKey || got.Header.Get("Authorization") != "" {
		t.Errorf("anthropic upstream saw %s, x-api-key %q, authorization %q", got.Path, got.Header.Get("X-Api-Key"), got.Header.Get("Authorization"))
	}
	if got.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("anthropic-version not forwarded: %v", got.Header)
	}
}

// A provider without a key (a local model server) gets no auth header, not
// the client's.
func TestKeylessProviderSendsNoCredential(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	gw := serve(t, dispatch.GatewayProvider{Name: "local", BaseURL: up.URL, API: dispatch.APIOpenAI})
	if code, body := do(t, "GET", gw.URL+"/local/models", map[string]string{"Authorization": "Bearer x"}, ""); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if a := up.last(t).Header.Get("Authorization"); a != "" {
		t.Fatalf("Authorization = %q, want none", a)
	}
}

// Dot segments cannot walk out of the provider's base path.
func TestPathCannotClimbOutOfTheBasePath(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	gw := serve(t, dispatch.GatewayProvider{Name: "oa", BaseURL: up.URL + "/api/v1", API: dispatch.APIOpenAI, Key: openAIKey})
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A raw request: an HTTP client would clean the path itself.
	fmt.Fprintf(conn, "GET /oa/../../../models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := up.last(t).Path; p != "/api/v1/models" {
		t.Fatalf("upstream path = %q, want /api/v1/models", p)
	}
}

func TestUnknownProviderIsRefused(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	gw := serve(t, dispatch.GatewayProvider{Name: "oa", BaseURL: up.URL, API: dispatch.APIOpenAI, Key: openAIKey})
	code, body := do(t, "POST", gw.URL+"/elsewhere/v1/chat/completions", nil, "{}")
	if code != http.StatusNotFound || !strings.Contains(body, `no provider \"elsewhere\"`) || !strings.Contains(body, "served: oa") {
		t.Fatalf("%d %s", code, body)
	}
	if strings.Contains(body, openAIKey) {
		t.Fatal("the refusal shows the key")
	}
}

// An unreachable provider is a 502 naming the provider, never the key.
func TestUnreachableProviderIs502WithoutTheKey(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	gw := serve(t, dispatch.GatewayProvider{Name: "oa", BaseURL: "http://" + dead + "/v1", API: dispatch.APIOpenAI, Key: openAIKey})
	code, body := do(t, "POST", gw.URL+"/oa/chat/completions", nil, "{}")
	if code != http.StatusBadGateway || !strings.Contains(body, "provider oa at "+dead) {
		t.Fatalf("%d %s", code, body)
	}
	if strings.Contains(body, openAIKey) {
		t.Fatal("the error shows the key")
	}
}

// Server-sent events reach the client one by one: the upstream holds its
// second event until the client has read the first through the gateway, so
// a buffering gateway deadlocks and the test fails at its deadline.
func TestStreamsPassThroughUnbuffered(t *testing.T) {
	t.Parallel()
	gotFirst := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: one\ndata: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: two\ndata: {\"n\":2}\n\n")
	}))
	t.Cleanup(up.Close)
	gw := serve(t, dispatch.GatewayProvider{Name: "an", BaseURL: up.URL, API: dispatch.APIAnthropic, Key: anthropicKey})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/an/v1/messages", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var events []string
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "event: ") {
			events = append(events, strings.TrimSpace(strings.TrimPrefix(line, "event: ")))
			if len(events) == 1 {
				close(gotFirst)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("stream stalled after %v: the gateway buffers", events)
			}
			break
		}
	}
	if strings.Join(events, ",") != "one,two" {
		t.Fatalf("events = %v", events)
	}
}

func TestLoadChecksTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"providers":[{"name":"anthropic","base_url":"https://api.anthropic.com","api":"anthropic","key":"`+anthropicKey+`"}]}`)
	cfg, err := gateway.Load(good)
	if err != nil || len(cfg.Providers) != 1 || cfg.Providers[0].Key != anthropicKey {
		t.Fatalf("Load = %+v, %v", cfg, err)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, anthropicKey) {
			t.Fatalf("formatting the config shows the key: %s", s)
		}
	}
	for name, content := range map[string]string{
		"notjson.json": `{`,
		"badname.json": `{"providers":[{"name":"A/B","base_url":"https://x","api":"openai"}]}`,
		"badurl.json":  `{"providers":[{"name":"a","base_url":"ftp://x","api":"openai"}]}`,
		"badapi.json":  `{"providers":[{"name":"a","base_url":"https://x","api":"grpc"}]}`,
		"dup.json":     `{"providers":[{"name":"a","base_url":"https://x","api":"openai"},{"name":"a","base_url":"https://y","api":"openai"}]}`,
	} {
		if _, err := gateway.Load(write(name, content)); err == nil {
			t.Errorf("%s: Load accepted %s", name, content)
		}
	}
	if _, err := gateway.Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

// The operator's key goes only to the model endpoints the harnesses use:
// anything else (files, batches, fine-tunes, the organisation's admin
// API, another method on a model endpoint) is a 403 that names the path
// and reaches nothing; the organisation and project headers an agent sets
// are dropped from what is forwarded.
func TestOnlyModelEndpointsAreForwarded(t *testing.T) {
	t.Parallel()
	oa, an, gw := serveBoth(t)
	cases := []struct {
		method, path string
		ok           bool
	}{
		{"POST", "/oa/chat/completions", true},
		{"POST", "/oa/responses", true},
		{"GET", "/oa/models", true},
		{"GET", "/oa/models/gpt-x", true},
		{"POST", "/an/v1/messages?beta=true", true},
		{"POST", "/an/v1/messages/count_tokens", true},
		{"GET", "/an/v1/models", true},
		{"GET", "/oa/files", false},
		{"POST", "/oa/files", false},
		{"POST", "/oa/batches", false},
		{"POST", "/oa/fine_tuning/jobs", false},
		{"GET", "/oa/organization/admin_api_keys", false},
		{"DELETE", "/oa/models/ft:gpt-x:acme", false},
		{"GET", "/oa/models/a/b", false},
		{"GET", "/oa/chat/completions", false},
		{"POST", "/oa/responses/resp_1/cancel", false},
		{"POST", "/an/v1/messages/batches", false},
		{"GET", "/an/v1/organizations/api_keys", false},
		{"POST", "/an/v1/files", false},
		{"POST", "/an/messages", false},
	}
	for _, c := range cases {
		before := oa.count() + an.count()
		code, body := do(t, c.method, gw.URL+c.path, map[string]string{
			"OpenAI-Organization": "org-agent", "OpenAI-Project": "proj-agent", "Content-Type": "application/json",
		}, `{}`)
		after := oa.count() + an.count()
		path, _, _ := strings.Cut(strings.SplitN(c.path, "/", 3)[2], "?")
		switch {
		case c.ok && code != 200:
			t.Errorf("%s %s: %d %s, want it forwarded", c.method, c.path, code, body)
		case !c.ok && (code != http.StatusForbidden || !strings.Contains(body, c.method+" /"+path+" is not forwarded")):
			t.Errorf("%s %s: %d %s, want a 403 naming the path", c.method, c.path, code, body)
		case !c.ok && after != before:
			t.Errorf("%s %s reached the provider", c.method, c.path)
		case !c.ok && (strings.Contains(body, openAIKey) || strings.Contains(body, anthropicKey)):
			t.Errorf("%s %s: the refusal shows a key", c.method, c.path)
		}
	}
	for _, u := range []*upstream{oa, an} {
		u.mu.Lock()
		reqs := append([]seen(nil), u.reqs...)
		u.mu.Unlock()
		for _, r := range reqs {
			for _, h := range []string{"OpenAI-Organization", "OpenAI-Project"} {
				if v := r.Header.Get(h); v != "" {
					t.Errorf("%s reached the provider with %s: %q", r.Path, h, v)
				}
			}
		}
	}
}
