package harness

import (
	"bytes"
	"errors"
)

// claudeSkippable reports whether line is a stream event about a content
// block (content_block_start, _delta, _stop), which the parser ignores. It
// walks the line once without building anything, looking only at the
// top-level "type" and the "type" of the top-level "event" object; brackets
// must balance and strings end, so a line cut short is an error. Any other
// line is left to the full parser.
func claudeSkippable(line []byte) (bool, error) {
	if len(line) == 0 || line[0] != '{' {
		return false, errors.New("not a JSON object")
	}
	var (
		stack      []byte // open brackets
		expectKey  bool   // the next string is an object key
		key        []byte // the last key read
		keyDepth   int    // len(stack) where key was read
		eventDepth int    // len(stack) inside the top-level "event" object, 0 outside
		typ, event []byte
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			end := claudeStringEnd(line, i+1)
			if end < 0 {
				return false, errors.New("line ends inside a string (partial line)")
			}
			s := line[i+1 : end]
			i = end
			if expectKey {
				key, keyDepth, expectKey = s, len(stack), false
				continue
			}
			if string(key) == "type" && keyDepth == len(stack) {
				switch {
				case keyDepth == 1:
					typ = s
				case keyDepth == eventDepth && eventDepth == 2:
					event = s
				}
			}
		case '{', '[':
			if c == '{' && len(stack) == 1 && keyDepth == 1 && string(key) == "event" {
				eventDepth = 2
			}
			stack = append(stack, c)
			expectKey = c == '{'
		case '}', ']':
			n := len(stack)
			if n == 0 || (c == '}') != (stack[n-1] == '{') {
				return false, errors.New("mismatched brackets")
			}
			if n == eventDepth {
				eventDepth = 0
			}
			stack = stack[:n-1]
			if len(stack) == 0 {
				if len(bytes.TrimSpace(line[i+1:])) > 0 {
					return false, errors.New("text after the object")
				}
				return string(typ) == "stream_event" && bytes.HasPrefix(event, []byte("content_block_")), nil
			}
		case ',':
			expectKey = stack[len(stack)-1] == '{'
		}
	}
	return false, errors.New("line ends inside the object (partial line)")
}

// claudeStringEnd returns the index of the quote closing the string whose
// content starts at i, or -1. Escapes are skipped, not decoded.
func claudeStringEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func claudeClip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
