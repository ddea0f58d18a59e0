package sandboxcfg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

//go:generate go run ./gen -o sandbox.schema.json

// SchemaDraft is the JSON Schema dialect of the generated schema.
const SchemaDraft = "https://json-schema.org/draft/2020-12/schema"

// Schema is the subset of JSON Schema the generator emits. Field order is
// the order of the written file, so diffs of the committed schema stay
// readable.
type Schema struct {
	Schema               string      `json:"$schema,omitempty"`
	Title                string      `json:"title,omitempty"`
	Description          string      `json:"description,omitempty"`
	Type                 any         `json:"type,omitempty"` // a string, or a list for shorthands
	Enum                 []string    `json:"enum,omitempty"`
	Minimum              *float64    `json:"minimum,omitempty"`
	Maximum              *float64    `json:"maximum,omitempty"`
	Properties           *Properties `json:"properties,omitempty"`
	Required             []string    `json:"required,omitempty"`
	AdditionalProperties any         `json:"additionalProperties,omitempty"` // false or *Schema
	Items                *Schema     `json:"items,omitempty"`
	OneOf                []*Schema   `json:"oneOf,omitempty"`
}

// Properties keeps the struct's field order; a Go map would sort the keys
// and the schema would no longer read like the documentation.
type Properties struct {
	names   []string
	schemas map[string]*Schema
}

// Get returns the property's schema, or nil.
func (p *Properties) Get(name string) *Schema { return p.schemas[name] }

// Names lists the properties in declaration order.
func (p *Properties) Names() []string { return append([]string(nil), p.names...) }

func (p *Properties) add(name string, s *Schema) {
	if p.schemas == nil {
		p.schemas = map[string]*Schema{}
	}
	p.names = append(p.names, name)
	p.schemas[name] = s
}

// MarshalJSON writes the properties in declaration order.
func (p *Properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range p.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.schemas[name])
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// JSONSchema builds the schema of .sandbox.yml from the Config model, so the
// file editors check against can never drift from what Parse accepts.
func JSONSchema() (*Schema, error) {
	s, err := schemaOf(reflect.TypeOf(Config{}), "Config", "")
	if err != nil {
		return nil, err
	}
	s.Schema = SchemaDraft
	s.Title = FileName
	s.Description = "Configuration of sandbox-bot for one repository: the agent, its budget, the services started in the sandbox and the checks run on its work."
	return s, nil
}

// MarshalSchema renders JSONSchema as the indented text committed in
// sandbox.schema.json.
func MarshalSchema() ([]byte, error) {
	s, err := JSONSchema()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indenting the schema: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// schemaOf maps one Go type; path names it (Config.services.image) in errors
// so an unsupported field added to the model is found at once.
func schemaOf(t reflect.Type, path string, tag reflect.StructTag) (*Schema, error) {
	if t == checksType {
		return checksSchema()
	}
	switch t.Kind() {
	case reflect.Pointer:
		// *bool and *int only tell "unset" from "zero"; in the file they
		// are plain values.
		return schemaOf(t.Elem(), path, tag)
	case reflect.Struct:
		return structSchema(t, path)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings, got %s", path, t.Key())
		}
		elem, err := schemaOf(t.Elem(), path+".*", "")
		if err != nil {
			return nil, err
		}
		if t.Elem().Kind() == reflect.String {
			// Parse takes any scalar for a string (PORT: 3000 in env),
			// and an editor should not flag what the bot accepts.
			elem.Type = []string{"string", "number", "boolean"}
		}
		return &Schema{Type: "object", AdditionalProperties: elem}, nil
	case reflect.Slice:
		items, err := schemaOf(t.Elem(), path+"[]", "")
		if err != nil {
			return nil, err
		}
		s := &Schema{Type: "array", Items: items}
		if t.Elem().Kind() == reflect.String {
			// A single string stands for a one-item list (setup: npm ci).
			s.Type = []string{"array", "string"}
		}
		return s, nil
	case reflect.String:
		s := &Schema{Type: "string"}
		if e := tag.Get("enum"); e != "" {
			s.Enum = strings.Split(e, ",")
		}
		return s, nil
	case reflect.Bool:
		return &Schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int64:
		return boundedSchema("integer", path, tag)
	case reflect.Float64:
		return boundedSchema("number", path, tag)
	}
	return nil, fmt.Errorf("%s: no JSON Schema mapping for Go type %s", path, t)
}

func boundedSchema(typ, path string, tag reflect.StructTag) (*Schema, error) {
	s := &Schema{Type: typ}
	for _, b := range []struct {
		key string
		dst **float64
	}{{"min", &s.Minimum}, {"max", &s.Maximum}} {
		v := tag.Get(b.key)
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: tag %s:%q is not a number", path, b.key, v)
		}
		*b.dst = &f
	}
	return s, nil
}

func structSchema(t reflect.Type, path string) (*Schema, error) {
	s := &Schema{Type: "object", Properties: &Properties{}, AdditionalProperties: false}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fs, err := schemaOf(f.Type, path+"."+name, f.Tag)
		if err != nil {
			return nil, err
		}
		fs.Description = f.Tag.Get("desc")
		s.Properties.add(name, fs)
		if f.Tag.Get("required") == "true" {
			s.Required = append(s.Required, name)
		}
	}
	return s, nil
}

// checksSchema mirrors decodeChecks: a mapping of check name to either the
// command itself or {command, timeout_seconds}.
func checksSchema() (*Schema, error) {
	long, err := structSchema(reflect.TypeOf(Check{}), "Config.validate.*")
	if err != nil {
		return nil, err
	}
	cmd, _ := reflect.TypeOf(Check{}).FieldByName("Command")
	short := &Schema{Type: "string", Description: cmd.Tag.Get("desc")}
	return &Schema{Type: "object", AdditionalProperties: &Schema{OneOf: []*Schema{short, long}}}, nil
}
