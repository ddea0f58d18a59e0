package modeltest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Prices of the scripted model in dollars per million tokens, so OpenCode
// reports real, non-zero costs that budget tests can trip.
const (
	InputPricePerM  = 3.0
	OutputPricePerM = 15.0
)

// OpenCodeModel is the --model value that selects the scripted model.
func (s *Server) OpenCodeModel() string { return ProviderID + "/" + s.Model }

// OpenCodeConfig returns an opencode.json document whose provider points at
// this server through @ai-sdk/openai-compatible, with per-token prices.
func (s *Server) OpenCodeConfig() map[string]any {
	return map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{
			ProviderID: map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Scripted model (modeltest)",
				"options": map[string]any{
					"baseURL": s.URL,
					"apiKey":  "modeltest-key",
				},
				"models": map[string]any{
					s.Model: map[string]any{
						"name":      "Scripted",
						"tool_call": true,
						// Image input, so a screenshot a tool returns
						// (the browser's) reaches the model as an image.
						"attachment":  true,
						"modalities":  map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}},
						"temperature": false,
						"cost":        map[string]any{"input": InputPricePerM, "output": OutputPricePerM},
						"limit":       map[string]any{"context": 200000, "output": 8192},
					},
				},
			},
		},
		"model":      s.OpenCodeModel(),
		"autoupdate": false,
		"share":      "disabled",
	}
}

// WriteOpenCodeConfig writes OpenCodeConfig as dir/opencode.json and returns
// its path, for OPENCODE_CONFIG.
func (s *Server) WriteOpenCodeConfig(dir string) (string, error) {
	b, err := json.MarshalIndent(s.OpenCodeConfig(), "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("modeltest: %w", err)
	}
	p := filepath.Join(dir, "opencode.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("modeltest: write %s: %w", p, err)
	}
	return p, nil
}

// OpenCodeConfigBehindGateway is the operator's opencode.json for a sandbox
// whose provider the model gateway serves: the provider's definition has
// no key and a base URL that does not answer, so only the gateway (which
// the harness points OpenCode at) can carry the requests.
func (s *Server) OpenCodeConfigBehindGateway() string {
	doc := s.OpenCodeConfig()
	opts := doc["provider"].(map[string]any)[ProviderID].(map[string]any)["options"].(map[string]any)
	opts["baseURL"] = "http://127.0.0.1:1/v1"
	delete(opts, "apiKey")
	raw, err := json.Marshal(doc)
	if err != nil {
		panic(err) // a literal map of strings always marshals
	}
	return string(raw)
}
