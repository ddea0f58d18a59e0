package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/media"
)

// mediaDir is where screenshots and recordings are committed, per task, so
// the PR body can link them at the media commit.
func mediaDir(taskID string) string { return ".sandbox/media/" + taskID }

// captureMedia screenshots dev.routes of the dev server and records a visit
// of them, commits the images in a media commit and pushes it. Media is a
// nicety: a failure is logged and reported, never fails the run.
func (r *run) captureMedia() {
	dev := r.cfg.Dev
	if dev.Command == "" || dev.Port == 0 || len(dev.Routes) == 0 {
		return
	}
	chromium, ffmpeg := r.opts.Chromium, r.opts.FFmpeg
	if chromium == "" || ffmpeg == "" {
		c, f := media.Lookup()
		chromium, ffmpeg = firstNonEmpty(chromium, c), firstNonEmpty(ffmpeg, f)
	}
	if chromium == "" {
		r.log.Warn().Msg("dev.routes are set but no Chromium is installed: no screenshots")
		r.prog.emit(dispatch.Progress{Stage: "media", Message: "skipped: no Chromium"})
		return
	}
	r.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("capturing %d route(s)", len(dev.Routes))})
	out := filepath.Join(r.order.OutputDir, "media")
	res, err := media.Capture(r.work, media.Options{
		Chromium: chromium, FFmpeg: ffmpeg, Dir: r.dir, Env: r.env,
		Command: dev.Command, Port: dev.Port, Routes: dev.Routes, OutDir: out, Credential: r.opts.Agent.credential(),
		Log: r.log.With().Str("stage", "media").Logger(),
	})
	if err != nil {
		r.log.Warn().Err(err).Msg("media capture failed")
		r.prog.emit(dispatch.Progress{Stage: "media", Message: "failed: " + clipString(err.Error(), 200)})
		if res == nil || len(res.Screenshots) == 0 {
			return
		}
	}
	rel := mediaDir(r.order.TaskID)
	dst := filepath.Join(r.dir, filepath.FromSlash(rel))
	var srcs, shots, recs []string
	for _, s := range res.Screenshots {
		srcs = append(srcs, s)
		shots = append(shots, rel+"/"+filepath.Base(s))
	}
	for _, s := range res.Recordings {
		// The animated WebP is what a PR body shows; the WebM stays in
		// the output directory.
		if strings.HasSuffix(s, ".webp") {
			srcs = append(srcs, s)
			recs = append(recs, rel+"/"+filepath.Base(s))
		}
	}
	if err := r.copyIntoCheckout(dst, srcs); err != nil {
		r.log.Warn().Err(err).Msg("media: copy into the checkout")
		return
	}
	r.gitMu.Lock()
	sha, err := r.git.CommitPaths(r.work, fmt.Sprintf("Add screenshots of %s\n\nCaptured by sandbox-bot from the dev server.\n\nTask: %s", strings.Join(dev.Routes, ", "), r.order.TaskID), rel)
	r.gitMu.Unlock()
	if err != nil || sha == "" {
		r.log.Warn().Err(err).Msg("media: commit")
		return
	}
	r.res.MediaCommit, r.res.ScreenshotPaths, r.res.RecordingPaths = sha, shots, recs
	if err := r.push(r.work); err != nil {
		r.log.Warn().Err(err).Msg("media: push")
	}
}

// copyIntoCheckout copies files into dir of the checkout, which is the
// agent's: as the agent when that is another user.
func (r *run) copyIntoCheckout(dir string, srcs []string) error {
	if a := r.opts.Agent; a != nil {
		cmd := exec.Command("sh", append([]string{"-c", `d="$0"; mkdir -p "$d" && cp -- "$@" "$d"/`, dir}, srcs...)...)
		cmd.Env = r.env
		a.apply(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("as %s: %w: %s", a.Name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, src := range srcs {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
