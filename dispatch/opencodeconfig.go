package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
)

var openCodeEnvRef = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// ReadOpenCodeConfig reads the operator's opencode.json (providers and
// models, which the runner re-addresses to the sandbox's model gateway)
// as one line of JSON, the form EnvOpenCodeConfigJSON carries (an env
// file cannot hold newlines), with the variables it reads through
// {env:VAR}. The bot and the local CLI both hand it to their sandboxes.
func ReadOpenCodeConfig(path string) (string, []string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", nil, fmt.Errorf("%s: not plain JSON (comments cannot be passed into a sandbox): %w", path, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		return "", nil, fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	var refs []string
	for _, m := range openCodeEnvRef.FindAllStringSubmatch(buf.String(), -1) {
		if !slices.Contains(refs, m[1]) {
			refs = append(refs, m[1])
		}
	}
	sort.Strings(refs)
	return buf.String(), refs, nil
}
