package sandboxcfg_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// FuzzParse feeds arbitrary bytes to Parse. .sandbox.yml comes from any
// repository the app is installed on, so Parse must never panic, and every
// rejection must be a report a person can act on: a sandboxcfg.Errors whose
// entries each name the file and a line or a field.
func FuzzParse(f *testing.F) {
	f.Add(readTestdata(f, "full.sandbox.yml"))
	for _, tc := range validParseCases() {
		f.Add([]byte(tc.yaml))
	}
	for _, tc := range errorParseCases() {
		f.Add([]byte(tc.yaml))
	}
	const file = "repo/.sandbox.yml"
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := sandboxcfg.Parse(file, data)
		again, errAgain := sandboxcfg.Parse(file, data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned both a config and an error: %v", err)
			}
			var errs sandboxcfg.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want sandboxcfg.Errors: %v", err, err)
			}
			if len(errs) == 0 || len(errs) > 20 {
				t.Fatalf("%d errors in the report, want 1 to 20", len(errs))
			}
			lines := yamlLines(data)
			for _, e := range errs {
				if e.File != file {
					t.Errorf("error %q names file %q, want %q", e, e.File, file)
				}
				if e.Pos.Line <= 0 && e.Field == "" {
					t.Errorf("error %q names neither a position nor a field", e)
				}
				if e.Pos.Line > lines {
					t.Errorf("error %q points past the end of a %d-line file", e, lines)
				}
				if e.Msg == "" {
					t.Errorf("error at %+v has no message", e.Pos)
				}
			}
			if errAgain == nil || errAgain.Error() != err.Error() {
				t.Fatalf("Parse is not deterministic:\n%v\n--- then ---\n%v", err, errAgain)
			}
			return
		}
		if c == nil {
			t.Fatal("Parse returned neither a config nor an error")
		}
		if errAgain != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("Parse is not deterministic: %#v then %#v (%v)", c, again, errAgain)
		}
		// An accepted file is a valid configuration without its positions
		// too, and defaults keep it valid.
		if err := c.Verify(); err != nil {
			t.Fatalf("Parse accepted a config that Verify rejects: %v", err)
		}
		r, err := c.Resolve()
		if err != nil {
			t.Fatalf("an accepted config does not resolve: %v", err)
		}
		if err := r.Check(); err != nil {
			t.Fatalf("a resolved config fails its own check: %v", err)
		}
		if b := r.RepairBudget(r.MaxBudgetUSD); b < 0 || b != b {
			t.Fatalf("RepairBudget = %v", b)
		}
	})
}

// yamlLines is an upper bound of the line numbers yaml.v3 can report: it
// breaks lines at \n, \r and the Unicode line separators.
func yamlLines(data []byte) int {
	n := 1 + bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r"))
	for _, sep := range []string{"\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(data, []byte(sep))
	}
	return n
}
