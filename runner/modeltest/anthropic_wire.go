package modeltest

// The Anthropic Messages wire format: how a turn is written back, whole or
// streamed, and how request blocks and errors are read and written.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

func (s *AnthropicServer) toolID(msgID string, i int, tu AnthropicToolUse) string {
	if tu.ID != "" {
		return tu.ID
	}
	return fmt.Sprintf("toolu_%s_%d", strings.TrimPrefix(msgID, "msg_"), i)
}

func anthropicStopReason(t AnthropicTurn) string {
	switch {
	case t.StopReason != "":
		return t.StopReason
	case len(t.ToolUses) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

func anthropicUsageJSON(u AnthropicUsage, output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens":               output,
	}
}

func anthropicInput(a any) (json.RawMessage, error) {
	switch v := a.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return v, nil
	case string:
		if !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("tool input %q is not JSON", v)
		}
		return json.RawMessage(v), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("tool input: %w", err)
		}
		return b, nil
	}
}

// message is the non-streaming response.
func (s *AnthropicServer) message(msgID, model string, t AnthropicTurn) map[string]any {
	content := []any{}
	if t.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": t.Text})
	}
	for i, tu := range t.ToolUses {
		in, err := anthropicInput(tu.Input)
		if err != nil {
			in = json.RawMessage("{}")
		}
		content = append(content, map[string]any{"type": "tool_use", "id": s.toolID(msgID, i, tu), "name": tu.Name, "input": in})
	}
	return map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": anthropicStopReason(t), "stop_sequence": nil,
		"usage": anthropicUsageJSON(t.Usage, t.Usage.OutputTokens),
	}
}

func (s *AnthropicServer) stream(w http.ResponseWriter, r *http.Request, msgID, model string, t AnthropicTurn) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_"+msgID)
	w.WriteHeader(http.StatusOK)
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": anthropicUsageJSON(t.Usage, 1),
	}})
	if t.Stall {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	idx := 0
	if t.Text != "" {
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, part := range split(t.Text, 3) {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for i, tu := range t.ToolUses {
		in, err := anthropicInput(tu.Input)
		if err != nil {
			// A broken script is the test's bug; say so where it shows.
			send("error", map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": "scripted server: " + err.Error()}})
			return
		}
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": s.toolID(msgID, i, tu), "name": tu.Name, "input": map[string]any{}}})
		for _, part := range split(string(in), 3) {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	send("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": anthropicStopReason(t), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": t.Usage.OutputTokens},
	})
	send("message_stop", map[string]any{})
}

// anthropicBlocks reads a message's content: a plain string or a list of
// blocks.
func anthropicBlocks(raw json.RawMessage) []AnthropicBlock {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return []AnthropicBlock{{Type: "text", Text: text}}
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
		Source    struct {
			Type string `json:"type"`
			Data string `json:"data"`
		} `json:"source"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil
	}
	out := make([]AnthropicBlock, 0, len(blocks))
	for _, b := range blocks {
		ab := AnthropicBlock{Type: b.Type, Text: b.Text, Name: b.Name, Input: b.Input, IsError: b.IsError, ToolUseID: b.ToolUseID}
		switch b.Type {
		case "tool_use":
			ab.ToolUseID = b.ID
		case "image":
			if img, err := base64.StdEncoding.DecodeString(b.Source.Data); b.Source.Type == "base64" && err == nil {
				ab.Images = [][]byte{img}
			}
		case "tool_result":
			var inner []AnthropicBlock
			if len(b.Content) > 0 {
				inner = anthropicBlocks(b.Content)
			}
			var parts []string
			for _, ib := range inner {
				if ib.Text != "" {
					parts = append(parts, ib.Text)
				}
				ab.Images = append(ab.Images, ib.Images...)
			}
			ab.Text = strings.Join(parts, "\n")
		}
		out = append(out, ab)
	}
	return out
}

func anthropicWriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func anthropicWriteError(w http.ResponseWriter, e *AnthropicError) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	typ := e.Type
	if typ == "" {
		typ = anthropicErrorType(status)
	}
	anthropicWriteJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": e.Message},
	})
}

func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}
