package sandboxcfg

import (
	"reflect"
	"strings"
	"testing"
)

// The generator must refuse a model field it cannot describe rather than
// write a schema that silently accepts anything there.
func TestSchemaOfUnsupportedTypes(t *testing.T) {
	t.Parallel()
	type withChan struct {
		Events chan int `yaml:"events"`
	}
	type withIntKeys struct {
		Ports map[int]string `yaml:"ports"`
	}
	type withBadBound struct {
		N int `yaml:"n" min:"one"`
	}
	type nested struct {
		Inner struct {
			F func() `yaml:"f"`
		} `yaml:"inner"`
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{withChan{}, "T.events: no JSON Schema mapping for Go type chan int"},
		{withIntKeys{}, "T.ports: map keys must be strings, got int"},
		{withBadBound{}, `T.n: tag min:"one" is not a number`},
		{nested{}, "T.inner.f: no JSON Schema mapping for Go type func()"},
	} {
		_, err := schemaOf(reflect.TypeOf(tc.v), "T", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("schemaOf(%T) = %v, want an error containing %q", tc.v, err, tc.want)
		}
	}
}

func TestSchemaSkipsUntaggedAndHiddenFields(t *testing.T) {
	t.Parallel()
	type s struct {
		Shown  string `yaml:"shown" desc:"d"`
		Hidden string `yaml:"-"`
		NoTag  string
		hidden string `yaml:"x"` //nolint:unused // the generator must skip unexported fields
	}
	_ = s{}.hidden
	got, err := schemaOf(reflect.TypeOf(s{}), "T", "")
	if err != nil {
		t.Fatal(err)
	}
	if names := got.Properties.Names(); !reflect.DeepEqual(names, []string{"shown"}) {
		t.Errorf("properties = %v, want [shown]", names)
	}
}
