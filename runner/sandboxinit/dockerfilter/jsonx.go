package dockerfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The engine decodes request bodies with encoding/json into its own
// structs, so it matches field names case-insensitively (with Unicode
// folding: "ſecurityOpt" is SecurityOpt) and takes the last of two keys
// that fold alike. The filter reads bodies as generic objects and looks
// fields up the same way; a body with two such keys in one object is
// refused, so the filter and the engine can never read different values.

// object is one decoded JSON object.
type object map[string]any

// decodeBody parses a request body into a generic object, keeping numbers
// exact, refusing trailing data and keys that fold alike.
func decodeBody(b []byte) (object, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return object{}, nil
	}
	if err := checkFoldDuplicates(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("request body is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("request body has data after its JSON value")
	}
	switch o := v.(type) {
	case map[string]any:
		return object(o), nil
	case nil:
		return object{}, nil
	}
	return nil, errors.New("request body is not a JSON object")
}

// checkFoldDuplicates walks every object in b and refuses one holding two
// keys that are equal under Unicode case folding.
func checkFoldDuplicates(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		obj   bool
		keys  []string
		inKey bool // next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("request body is not JSON: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.inKey {
			if k, ok := tok.(string); ok {
				for _, seen := range top.keys {
					if strings.EqualFold(seen, k) {
						return fmt.Errorf("request body has the field %q twice (as %q and %q); refused because the engine would read only one of them", k, seen, k)
					}
				}
				top.keys = append(top.keys, k)
				top.inKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.obj {
				top.inKey = true
			}
			stack = append(stack, &frame{obj: true, inKey: true})
		case json.Delim('['):
			if top != nil && top.obj {
				top.inKey = true
			}
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top != nil && top.obj {
				top.inKey = true
			}
		}
	}
}

// field returns the value stored under the key that folds to name, and
// the key as written.
func (o object) field(name string) (any, string, bool) {
	for k, v := range o {
		if strings.EqualFold(k, name) {
			return v, k, true
		}
	}
	return nil, "", false
}

// str returns a string field ("" when absent or null).
func (o object) str(name string) (string, error) {
	v, _, ok := o.field(name)
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %s", name, jsonKind(v))
	}
	return s, nil
}

// obj returns an object field (nil when absent or null).
func (o object) obj(name string) (object, error) {
	v, _, ok := o.field(name)
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an object, got %s", name, jsonKind(v))
	}
	return object(m), nil
}

// list returns an array field (nil when absent or null).
func (o object) list(name string) ([]any, error) {
	v, _, ok := o.field(name)
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an array, got %s", name, jsonKind(v))
	}
	return l, nil
}

// strings returns an array of strings field.
func (o object) strings(name string) ([]string, error) {
	l, err := o.list(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for _, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want strings, got %s", name, jsonKind(v))
		}
		out = append(out, s)
	}
	return out, nil
}

// isZero says whether v is JSON's null, false, 0, "", [] or {}: the value
// a setting has when nobody set it.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// canonical returns the engine's spelling of k among names, or "".
func canonical(k string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(k, n) {
			return n
		}
	}
	return ""
}
