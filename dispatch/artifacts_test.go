package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// writeTree makes files (path -> content) below dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func taken(a *dispatch.Artifacts) map[string]string {
	out := map[string]string{}
	for _, f := range a.Files {
		out[f.Path] = string(f.Data)
	}
	return out
}

func skipped(a *dispatch.Artifacts) map[string]string {
	out := map[string]string{}
	for _, s := range a.Skipped {
		out[s.Path] = s.Reason
	}
	return out
}

func read(t *testing.T, root string, caps dispatch.ArtifactCaps) *dispatch.Artifacts {
	t.Helper()
	a, err := dispatch.ReadArtifacts(context.Background(), root, "out/artifacts", caps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// What a hostile agent leaves: links to files and directories outside,
// a pipe, names git cannot store. Nothing of it is read, each is named.
func TestArtifactsRefuseLinksAndSpecialFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	arts := filepath.Join(root, "out", "artifacts")
	secret := filepath.Join(root, "secrets")
	writeTree(t, secret, map[string]string{"token": "ghs_secret"})
	writeTree(t, arts, map[string]string{"report.md": "ok", "sub/deep/x.txt": "x", "bad\nname.txt": "n"})
	for link, target := range map[string]string{"token-link": filepath.Join(secret, "token"), "dir-link": secret, "sub/rel-link": "../../../secrets/token"} {
		if err := os.Symlink(target, filepath.Join(arts, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(arts, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(arts, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := read(t, root, dispatch.DefaultArtifactCaps())
	if got := taken(a); len(got) != 2 || got["report.md"] != "ok" || got["sub/deep/x.txt"] != "x" {
		t.Errorf("taken %v; want report.md and sub/deep/x.txt", got)
	}
	want := map[string]string{
		"token-link": dispatch.SkipSymlink, "dir-link": dispatch.SkipSymlink, "sub/rel-link": dispatch.SkipSymlink,
		"pipe": dispatch.SkipNotRegular, ".git": dispatch.SkipBadName, "bad\nname.txt": dispatch.SkipBadName,
	}
	got := skipped(a)
	for p, reason := range want {
		if got[p] != reason {
			t.Errorf("%q: skipped as %q; want %q (all: %v)", p, got[p], reason, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v; want %v", got, want)
	}
	for _, f := range a.Files {
		if strings.Contains(string(f.Data), "ghs_secret") {
			t.Fatalf("the token was read through %s", f.Path)
		}
	}
}

// The directories above the artifacts (out/, artifacts/) are the sandbox's
// too: a link there is refused as a whole, not followed.
func TestArtifactsDirectoryThatIsALink(t *testing.T) {
	t.Parallel()
	for _, link := range []string{"out", "out/artifacts"} {
		t.Run(link, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			elsewhere := t.TempDir()
			writeTree(t, elsewhere, map[string]string{"artifacts/passwd": "root:x:0:0", "passwd": "root:x:0:0"})
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(root, link)); err != nil {
				t.Fatal(err)
			}
			a := read(t, root, dispatch.DefaultArtifactCaps())
			if len(a.Files) != 0 || len(a.Skipped) != 1 || a.Skipped[0].Reason != dispatch.SkipSymlink {
				t.Fatalf("read %v, skipped %+v; want nothing read and the directory named a link", taken(a), a.Skipped)
			}
		})
	}
}

// A run without an artifacts directory has no artifacts and no error;
// a task directory that is gone is ErrNotFound.
func TestArtifactsMissing(t *testing.T) {
	t.Parallel()
	a := read(t, t.TempDir(), dispatch.DefaultArtifactCaps())
	if len(a.Files)+len(a.Skipped) != 0 {
		t.Fatalf("got %+v from an empty task directory", a)
	}
	if _, err := dispatch.ReadArtifacts(context.Background(), filepath.Join(t.TempDir(), "gone"), "out/artifacts", dispatch.DefaultArtifactCaps()); err == nil {
		t.Fatal("a missing task directory read without an error")
	}
	if _, err := dispatch.ReadArtifacts(context.Background(), t.TempDir(), "../escape", dispatch.DefaultArtifactCaps()); err == nil {
		t.Fatal("a path above the task directory was accepted")
	}
}

// Files are taken in path order until the total cap; one over the
// per-file cap is skipped whatever the total; the file count is capped
// too. A sparse file counts its full size, so it cannot slip through.
func TestArtifactCaps(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	arts := filepath.Join(root, "out", "artifacts")
	writeTree(t, arts, map[string]string{
		"a.txt": strings.Repeat("a", 40), "b.txt": strings.Repeat("b", 40), "c.txt": strings.Repeat("c", 40),
		"d/e.txt": strings.Repeat("e", 10), "f.txt": strings.Repeat("f", 11),
	})
	if err := os.Truncate(filepath.Join(arts, "f.txt"), 1<<30); err != nil {
		t.Fatal(err)
	}
	a := read(t, root, dispatch.ArtifactCaps{FileBytes: 50, TotalBytes: 100, MaxFiles: 10})
	if got := taken(a); len(got) != 3 || got["a.txt"] == "" || got["b.txt"] == "" || got["d/e.txt"] == "" {
		t.Errorf("taken %v; want a.txt, b.txt and d/e.txt", got)
	}
	if got := skipped(a); got["c.txt"] != dispatch.SkipTotalCap || got["f.txt"] != dispatch.SkipFileCap || len(got) != 2 {
		t.Errorf("skipped %v; want c.txt over the total and f.txt over the per-file cap", got)
	}
	for _, s := range a.Skipped {
		if s.Path == "f.txt" && s.Size != 1<<30 {
			t.Errorf("f.txt is listed at %d bytes; want its size, %d", s.Size, 1<<30)
		}
	}
	if a.Bytes() != 90 {
		t.Errorf("Bytes = %d; want 90", a.Bytes())
	}

	a = read(t, root, dispatch.ArtifactCaps{FileBytes: 50, TotalBytes: 1000, MaxFiles: 2})
	if got := skipped(a); len(a.Files) != 2 || got["c.txt"] != dispatch.SkipMaxFiles || got["d/e.txt"] != dispatch.SkipMaxFiles {
		t.Errorf("with 2 files at most: taken %v, skipped %v", taken(a), got)
	}
}

// A tree nested past the depth bound, or wider than the walk bound, ends
// the walk with a note instead of taking the bot's time.
func TestArtifactWalkBounds(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, filepath.Join(root, "out", "artifacts"), map[string]string{strings.Repeat("d/", 40) + "x.txt": "x", "y.txt": "y"})
	a := read(t, root, dispatch.DefaultArtifactCaps())
	if got := skipped(a); len(got) != 1 || got[strings.TrimSuffix(strings.Repeat("d/", 32), "/")] != dispatch.SkipTooDeep || taken(a)["y.txt"] != "y" {
		t.Errorf("deep: taken %v, skipped %v; want y.txt and a note at depth 32", taken(a), got)
	}

	root = t.TempDir()
	for i := range 30 {
		writeTree(t, filepath.Join(root, "out", "artifacts"), map[string]string{filepath.Join("wide", strings.Repeat("w", i+1)+".txt"): "w"})
	}
	a = read(t, root, dispatch.ArtifactCaps{FileBytes: 10, TotalBytes: 100, MaxFiles: 2})
	// Two files taken, then the file count cap, and the walk ends after
	// 20 entries (10 x MaxFiles) with one note.
	if len(a.Files) != 2 || len(a.Skipped) != 18 || a.Skipped[17].Reason != dispatch.SkipMaxFiles || !strings.HasSuffix(a.Skipped[17].Path, "and what follows") {
		t.Errorf("wide: taken %v, skipped %+v", taken(a), a.Skipped)
	}
}

func TestArtifactCapsValidate(t *testing.T) {
	t.Parallel()
	if err := dispatch.DefaultArtifactCaps().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []dispatch.ArtifactCaps{{TotalBytes: 1, MaxFiles: 1}, {FileBytes: 1, MaxFiles: 1}, {FileBytes: 1, TotalBytes: 1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v passed", c)
		}
		if _, err := dispatch.CollectArtifacts(context.Background(), nil, c); err == nil {
			t.Errorf("CollectArtifacts took %+v", c)
		}
	}
}

func TestValidArtifactName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"report.md": true, "a [b](c) `d` @e.md": true, "ünïcode.txt": true, ".hidden": true,
		"": false, ".": false, "..": false, ".git": false, ".GIT": false, "a\x00b": false, "a\nb": false, "a\\b": false,
		"\xff.txt": false, strings.Repeat("x", 256): false, "a\x7fb": false,
	} {
		if got := dispatch.ValidArtifactName(name); got != ok {
			t.Errorf("ValidArtifactName(%q) = %v; want %v", name, got, ok)
		}
	}
}
