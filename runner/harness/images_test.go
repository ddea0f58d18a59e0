package harness_test

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n0000")

// OpenCode attaches each image file with --file; Claude Code takes the
// prompt and the images' bytes as one stream-json user message.
func TestHarnessesHandImagesOver(t *testing.T) {
	t.Parallel()
	imgs := []harness.Image{{Path: "/tmp/sandbox-images-1/image-1.png", MediaType: "image/png", Data: pngMagic}}
	req := harness.Request{Dir: "/work", Prompt: "What is in the picture?", Images: imgs}

	cmd, err := harness.NewOpenCode("opencode").Command(req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cmd.Args, "--file=/tmp/sandbox-images-1/image-1.png") {
		t.Errorf("opencode args %v lack the image file", cmd.Args)
	}
	if prompt, _ := io.ReadAll(cmd.Stdin); string(prompt) != req.Prompt {
		t.Errorf("opencode's stdin is %q, want the prompt", prompt)
	}

	cmd, err = harness.NewClaudeCode("claude").Command(req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cmd.Args, "--input-format=stream-json") {
		t.Errorf("claude args %v lack --input-format=stream-json", cmd.Args)
	}
	line, _ := io.ReadAll(cmd.Stdin)
	var msg struct {
		Type    string
		Message struct {
			Role    string
			Content []struct {
				Type   string
				Text   string
				Source struct {
					Type      string
					MediaType string `json:"media_type"`
					Data      []byte
				}
			}
		}
	}
	if err := json.Unmarshal(line, &msg); err != nil || line[len(line)-1] != '\n' {
		t.Fatalf("claude's stdin is not one JSON line: %v\n%s", err, line)
	}
	c := msg.Message.Content
	if msg.Type != "user" || msg.Message.Role != "user" || len(c) != 2 || c[0].Text != req.Prompt ||
		c[1].Type != "image" || c[1].Source.Type != "base64" || c[1].Source.MediaType != "image/png" || !bytes.Equal(c[1].Source.Data, pngMagic) {
		t.Errorf("claude's message: %+v", msg)
	}

	// Without images, the prompt is plain text on stdin, as before.
	req.Images = nil
	cmd, _ = harness.NewClaudeCode("claude").Command(req)
	if slices.Contains(cmd.Args, "--input-format=stream-json") {
		t.Errorf("no images, yet %v", cmd.Args)
	}
}
