package cilog

import (
	"fmt"
	"strings"
	"testing"
)

// The fix run gets the failing step's lines up to its error, cleaned, and
// no more than the bound from their end.
func TestLogTailIsTheFailingStep(t *testing.T) {
	t.Parallel()
	stamp := "2026-11-27T10:00:00.1234567Z "
	var b strings.Builder
	b.WriteString("\ufeff" + stamp + "##[group]Run actions/checkout@v4\n" + stamp + "checked out\n")
	b.WriteString(stamp + "##[group]Run go test ./...\n")
	for i := range 100 {
		fmt.Fprintf(&b, "%s=== RUN TestThing%d\n", stamp, i)
	}
	b.WriteString(stamp + "\x1b[31m--- FAIL: TestGreeting (0.00s)\x1b[0m\n" + stamp + "##[error]Process completed with exit code 1.\n")
	b.WriteString(stamp + "##[group]Run actions/upload-artifact@v4\n" + stamp + "Post job cleanup.\n")
	log := b.String()

	tail, size, err := Tail(strings.NewReader(log), 1<<20)
	if err != nil || size != int64(len(log)) {
		t.Fatalf("size %d of %d, %v", size, len(log), err)
	}
	if !strings.HasPrefix(tail, "##[group]Run go test ./...\n=== RUN TestThing0\n") || !strings.HasSuffix(tail, "--- FAIL: TestGreeting (0.00s)\n##[error]Process completed with exit code 1.") {
		t.Errorf("the failing step is not the tail:\n%s", tail)
	}
	for _, not := range []string{"checked out", "upload-artifact", "cleanup", "2026-11-27T", "\x1b"} {
		if strings.Contains(tail, not) {
			t.Errorf("the tail holds %q", not)
		}
	}
	small, _, _ := Tail(strings.NewReader(log), 200)
	if len(small) > 200 || !strings.HasSuffix(small, "##[error]Process completed with exit code 1.") || strings.Contains(small, "TestThing0\n") {
		t.Errorf("bounded tail (%d bytes):\n%s", len(small), small)
	}
	// No error line: the end of the last step.
	plain, _, _ := Tail(strings.NewReader("a\nb\nc\n"), 3)
	if plain != "c" {
		t.Errorf("tail without an error line %q", plain)
	}
}
