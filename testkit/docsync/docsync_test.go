package docsync

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(f, a...))
	runtime.Goexit()
}

// run calls Check on its own goroutine, as a Fatalf ends it.
func run(t *testing.T, path, body string, update bool) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); Check(r, path, "go test ./x -update", body, update) }()
	<-done
	return r.errs
}

// -update writes the section between the markers, leaving the rest; the
// same body then passes, another fails naming the command, and a file
// without markers fails.
func TestCheckAndUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Title\n\n" + Start("go test ./x -update") + "\nstale\n" + End + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := run(t, path, "| a | b |\n", true); len(errs) > 0 {
		t.Fatalf("update: %v", errs)
	}
	b, _ := os.ReadFile(path)
	want := "# Title\n\n" + Start("go test ./x -update") + "\n\n| a | b |\n\n" + End + "\n\nafter\n"
	if string(b) != want {
		t.Errorf("after -update:\n%s\nwant:\n%s", b, want)
	}
	if errs := run(t, path, "| a | b |", false); len(errs) > 0 {
		t.Errorf("the same body: %v", errs)
	}
	if errs := run(t, path, "| a | c |", false); len(errs) != 1 || !strings.Contains(errs[0], "go test ./x -update") {
		t.Errorf("another body: %v, want one error naming the command", errs)
	}
	if err := os.WriteFile(path, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := run(t, path, "x", false); len(errs) != 1 || !strings.Contains(errs[0], "lacks the markers") {
		t.Errorf("no markers: %v", errs)
	}
}
