package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Media that passes the per-file cap, or would pass the per-run cap, is
// left out with a note naming it; the rest keeps its order.
func TestCapMedia(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name string, size int) mediaFile {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return mediaFile{src: p, recording: strings.HasSuffix(name, ".webp")}
	}
	link := filepath.Join(dir, "link.png")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	r := &mediaCapture{res: &dispatch.Result{}, fileCap: 130, runCap: 250}
	kept := r.capMedia([]mediaFile{
		file("a.png", 50), file("huge.png", 150), file("b.png", 90), {src: link}, file("c.webp", 120), file("d.webp", 60),
	})
	var names []string
	for _, f := range kept {
		names = append(names, filepath.Base(f.src))
	}
	if strings.Join(names, ",") != "a.png,b.png,d.webp" {
		t.Fatalf("kept %v, want a.png, b.png and d.webp", names)
	}
	notes := strings.Join(r.res.MediaOmitted, "\n")
	for _, want := range []string{"huge.png: 150 bytes is over the per-file cap of 130 bytes", "link.png: not a regular file", "c.webp: 120 bytes would pass the per-run cap of 250 bytes"} {
		if !strings.Contains(notes, want) {
			t.Errorf("media_omitted lacks %q:\n%s", want, notes)
		}
	}
	if len(r.res.MediaOmitted) != 3 {
		t.Errorf("media_omitted = %q, want 3 notes", r.res.MediaOmitted)
	}
}
