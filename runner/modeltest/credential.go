package modeltest

import "testing"

// CheckCredential fails t unless the server received requests and every one
// carried key as its bearer token: what a test of the model gateway asserts
// reached the provider.
func (s *Server) CheckCredential(t testing.TB, key string) {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("the scripted model received no request")
	}
	for i, q := range reqs {
		if q.Authorization != "Bearer "+key {
			t.Errorf("request %d reached the model with Authorization %q, want the gateway's key", i, q.Authorization)
		}
	}
}

// CheckCredential fails t unless the server received requests and every one
// carried key in x-api-key and no Authorization header.
func (s *AnthropicServer) CheckCredential(t testing.TB, key string) {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("the scripted model received no request")
	}
	for i, q := range reqs {
		if q.APIKey != key || q.Authorization != "" {
			t.Errorf("request %d %s reached the model with x-api-key %q authorization %q, want the gateway's key", i, q.Path, q.APIKey, q.Authorization)
		}
	}
}
