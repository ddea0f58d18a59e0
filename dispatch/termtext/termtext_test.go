package termtext

import "testing"

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\nwith\ttabs", "plain text\nwith\ttabs"},
		// OpenCode's coloured error, as it reached a PR body.
		{"opencode: exit status 1: \x1b[91m\x1b[1mError: \x1b[0mFailed to read file: Permission denied", "opencode: exit status 1: Error: Failed to read file: Permission denied"},
		// A window title (OSC) and a hyperlink, both ways of ending them.
		{"a\x1b]0;title\x07b\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\c", "ablinkc"},
		// Cursor movement and erasing, which rewrite what a terminal shows.
		{"safe\x1b[2K\x1b[1A\x1b[Hhidden", "safehidden"},
		// C1 controls (the 8-bit CSI) and other C0 controls.
		{"x\u009b31my\x08z\x00", "x31myz"},
		{"progress 10%\rprogress 100%\r\n", "progress 10%\nprogress 100%\n"},
		{"ünïcödé ✅", "ünïcödé ✅"},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	f.Add("\x1b[91mError\x1b[0m")
	f.Add("a\x1b]0;t\x07b")
	f.Fuzz(func(t *testing.T, s string) {
		out := Clean(s)
		if needsCleaning(out) {
			t.Fatalf("Clean(%q) = %q still holds a control character", s, out)
		}
	})
}
