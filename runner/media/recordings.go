package media

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// isRecording reports whether name is a screencast the agent may leave in
// its recordings directory: chrome-devtools-mcp's recorder writes MP4, its
// ffmpeg-based one (and most other tools) WebM.
func isRecording(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".webm", ".mp4":
		return true
	}
	return false
}

// Converted is one of the agent's recordings as an animated WebP.
type Converted struct {
	Source string // the agent's file
	WebP   string // the animated WebP, in the output directory
}

// ConvertRecordings turns every WebM and MP4 directly in dir into an
// animated WebP in out (which the credential's user must be able to
// write), with ffmpeg run as that user: the files are the agent's, so
// they are read with the agent's rights, and a link to a file only the
// runner can read leads nowhere. Files that are not regular, or that
// ffmpeg cannot read, are reported in skipped and left out.
func ConvertRecordings(ctx context.Context, ffmpegBin, dir, out string, cred *syscall.Credential) (done []Converted, skipped []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("media: read the recordings directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if isRecording(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		src := filepath.Join(dir, name)
		if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
			skipped = append(skipped, name+": not a regular file")
			continue
		}
		dst := filepath.Join(out, RouteFile(strings.TrimSuffix(name, filepath.Ext(name)))+".webp")
		// At most a minute, at 5 frames a second and at most 800 px wide:
		// enough to follow an interaction, small enough for a PR page.
		cmd := exec.CommandContext(ctx, ffmpegBin, "-y", "-loglevel", "error", "-t", "60", "-i", src,
			"-vf", "fps=5,scale='min(800,iw)':-2", "-c:v", "libwebp", "-lossless", "0", "-q:v", "60",
			"-loop", "0", "-an", dst)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if b, err := cmd.CombinedOutput(); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: ffmpeg could not convert it: %s", name, clip(strings.TrimSpace(string(b)), 200)))
			continue
		}
		done = append(done, Converted{Source: src, WebP: dst})
	}
	return done, skipped, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
