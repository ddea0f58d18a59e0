package sandboxcfg

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A field added to the file's Config reaches the run only through
// Resolved: it needs a field there of the same name, with the file's key
// as its JSON name (the wire form reads like the file). Routines are the
// scheduler's, read from the default branch's file, and never reach a run.
func TestResolvedCarriesEveryConfigField(t *testing.T) {
	t.Parallel()
	cf, rf := reflect.TypeFor[Config](), reflect.TypeFor[Resolved]()
	notRun := 0
	for i := range cf.NumField() {
		f := cf.Field(i)
		if f.Name == "Routines" {
			notRun++
			continue
		}
		r, ok := rf.FieldByName(f.Name)
		if !ok {
			t.Errorf("Config.%s has no field in Resolved: add it there, its default to resolve and its way back to layer (resolved.go)", f.Name)
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if wire, _, _ := strings.Cut(r.Tag.Get("json"), ","); wire != key {
			t.Errorf("Resolved.%s is %q on the wire, the file's key is %q", f.Name, wire, key)
		}
	}
	if cf.NumField()-notRun != rf.NumField() {
		t.Errorf("Config has %d fields, Resolved %d", cf.NumField(), rf.NumField())
	}
}

// Resolving what a resolved configuration says as a layer changes
// nothing: layer loses nothing on the way back, and defaults apply once.
func TestLayerRoundTrip(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "full.sandbox.yml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(".sandbox.yml", raw)
	if err != nil {
		t.Fatal(err)
	}
	r := MustResolve(*c)
	if again := MustResolve(r.layer()); !reflect.DeepEqual(again, r) {
		t.Errorf("resolved twice:\n got %#v\nwant %#v", again, r)
	}
	if err := r.Check(); err != nil {
		t.Error(err)
	}
}
