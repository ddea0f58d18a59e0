package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/runner/media"
)

// mediaDir is where screenshots and recordings are committed, per task, so
// the PR body can link them at the media commit.
func mediaDir(taskID string) string { return ".sandbox/media/" + taskID }

// Default media caps: GitHub shows images up to 10 MB in a PR body, and a
// branch's history keeps every byte of the media commit.
const (
	defaultMediaFileCap = 5 << 20
	defaultMediaRunCap  = 20 << 20
)

// mediaFile is one file for the media commit.
type mediaFile struct {
	src       string // where it is now
	recording bool
}

// captureMedia screenshots dev.routes of the dev server at a desktop and a
// mobile width, records a visit of them, converts the agent's own
// recordings to animated WebP, and commits what fits the caps in a media
// commit whose SHA the receipt keeps, then removes it again in the next
// commit: the PR body shows the images from the media commit while the
// branch's tree stays clean. Media is a nicety: a failure is logged and
// reported, never fails the run.
func (r *run) captureMedia() {
	files := append(r.captureRoutes(), r.agentRecordings()...)
	files = r.capMedia(files)
	if len(files) == 0 {
		return
	}
	rel := mediaDir(r.order.TaskID)
	dst := filepath.Join(r.dir, filepath.FromSlash(rel))
	var srcs, shots, recs []string
	for _, f := range files {
		srcs = append(srcs, f.src)
		if f.recording {
			recs = append(recs, rel+"/"+filepath.Base(f.src))
		} else {
			shots = append(shots, rel+"/"+filepath.Base(f.src))
		}
	}
	if err := r.copyIntoCheckout(dst, srcs); err != nil {
		r.mediaFailed("copy into the checkout", err)
		return
	}
	r.br.mu.Lock()
	defer r.br.mu.Unlock()
	sha, err := r.git.CommitPaths(r.work, fmt.Sprintf("Add screenshots and recordings for review\n\nCaptured by sandbox-bot; the next commit removes them, the PR shows them\nfrom this one.\n\nTask: %s", r.order.TaskID), rel)
	if err == nil && sha == "" {
		err = errors.New("nothing to commit")
	}
	if err != nil {
		r.mediaFailed("commit", err)
		return
	}
	if err := r.removeFromCheckout(dst); err != nil {
		r.mediaFailed("remove from the checkout", err)
		return
	}
	if _, err := r.git.CommitPaths(r.work, fmt.Sprintf("Remove the review media from the branch tip\n\nThey stay in %s, where the PR links them.\n\nTask: %s", sha, r.order.TaskID), rel); err != nil {
		r.mediaFailed("removal commit", err)
		return
	}
	r.res.MediaCommit, r.res.ScreenshotPaths, r.res.RecordingPaths = sha, shots, recs
	if len(shots) > 0 {
		r.res.MediaError = ""
	}
	r.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("media commit %s: %d screenshot(s), %d recording(s)", sha[:12], len(shots), len(recs))})
}

// captureRoutes screenshots and records dev.routes.
func (r *run) captureRoutes() []mediaFile {
	dev := r.cfg.Dev
	if dev.Command == "" || dev.Port == 0 || len(dev.Routes) == 0 {
		return nil
	}
	chromium, ffmpeg := r.tools()
	if chromium == "" {
		r.mediaFailed("", errors.New("no Chromium is installed in the sandbox"))
		return nil
	}
	r.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("capturing %d route(s)", len(dev.Routes))})
	res, err := media.Capture(r.work, media.Options{
		Chromium: chromium, FFmpeg: ffmpeg, Dir: r.dir, Env: r.env,
		Command: dev.Command, Port: dev.Port, Routes: dev.Routes, OutDir: filepath.Join(r.order.OutputDir, "media"),
		Credential: r.opts.Agent.credential(), Log: r.log.With().Str("stage", "media").Logger(),
	})
	if err != nil {
		r.mediaFailed("", err)
		if res == nil {
			return nil
		}
	}
	var files []mediaFile
	for _, s := range res.Screenshots {
		files = append(files, mediaFile{src: s})
	}
	for _, s := range res.Recordings {
		// The animated WebP is what a PR body shows; the WebM stays in
		// the output directory.
		if strings.HasSuffix(s, ".webp") {
			files = append(files, mediaFile{src: s, recording: true})
		}
	}
	return files
}

// mediaFailed reports why the screenshots a project asks for are not in
// the PR: in the log, the progress and the receipt (media_error), which
// the PR body shows as "Screenshots: not taken: <reason>". A reason from a
// step is prefixed with it.
func (r *run) mediaFailed(step string, err error) {
	reason := err.Error()
	if step != "" {
		reason = step + ": " + reason
	}
	reason = r.red.String(termtext.Clean(strings.TrimPrefix(reason, "media: ")))
	r.log.Warn().Str("reason", reason).Msg("media: no screenshots")
	r.prog.emit(dispatch.Progress{Stage: "media", Message: "failed: " + clipString(reason, 200)})
	if r.res.MediaError == "" {
		r.res.MediaError = clipString(reason, 500)
	}
}

// agentRecordings converts what the agent recorded with its browser.
func (r *run) agentRecordings() []mediaFile {
	if r.browser == nil {
		return nil
	}
	_, ffmpeg := r.tools()
	if ffmpeg == "" {
		r.log.Warn().Msg("no ffmpeg: the agent's recordings are left out")
		return nil
	}
	// ffmpeg runs as the agent and writes where the agent may.
	out := filepath.Join(r.workDir, "recordings-webp")
	if err := os.MkdirAll(out, 0o755); err != nil {
		r.log.Warn().Err(err).Msg("media: recordings output")
		return nil
	}
	if err := r.opts.Agent.give(out); err != nil {
		r.log.Warn().Err(err).Msg("media: recordings output")
		return nil
	}
	done, skipped, err := media.ConvertRecordings(r.work, ffmpeg, r.browser.recordings, out, r.opts.Agent.credential())
	if err != nil {
		r.log.Warn().Err(err).Msg("media: the agent's recordings")
	}
	for _, s := range skipped {
		r.res.MediaOmitted = append(r.res.MediaOmitted, "recording "+s)
	}
	var files []mediaFile
	for _, c := range done {
		files = append(files, mediaFile{src: c.WebP, recording: true})
	}
	return files
}

// capMedia keeps the files that fit the per-file and per-run caps, in
// order (screenshots before recordings), and notes in the receipt what it
// left out.
func (r *run) capMedia(files []mediaFile) []mediaFile {
	fileCap, runCap := r.opts.MediaFileCap, r.opts.MediaRunCap
	if fileCap <= 0 {
		fileCap = defaultMediaFileCap
	}
	if runCap <= 0 {
		runCap = defaultMediaRunCap
	}
	var kept []mediaFile
	var total int64
	for _, f := range files {
		fi, err := os.Lstat(f.src)
		name := filepath.Base(f.src)
		switch {
		case err != nil || !fi.Mode().IsRegular():
			r.res.MediaOmitted = append(r.res.MediaOmitted, name+": not a regular file")
		case fi.Size() > fileCap:
			r.res.MediaOmitted = append(r.res.MediaOmitted, fmt.Sprintf("%s: %s is over the per-file cap of %s", name, mib(fi.Size()), mib(fileCap)))
		case total+fi.Size() > runCap:
			r.res.MediaOmitted = append(r.res.MediaOmitted, fmt.Sprintf("%s: %s would pass the per-run cap of %s", name, mib(fi.Size()), mib(runCap)))
		default:
			total += fi.Size()
			kept = append(kept, f)
		}
	}
	return kept
}

// mib says how big n bytes are, for the receipt's notes.
func mib(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// tools are Chromium and ffmpeg: the options', else found on PATH.
func (r *run) tools() (chromium, ffmpeg string) {
	chromium, ffmpeg = r.opts.Chromium, r.opts.FFmpeg
	if chromium == "" || ffmpeg == "" {
		c, f := media.Lookup()
		chromium, ffmpeg = firstNonEmpty(chromium, c), firstNonEmpty(ffmpeg, f)
	}
	return chromium, ffmpeg
}

// copyIntoCheckout copies files into dir of the checkout, which is the
// agent's: as the agent when that is another user.
func (r *run) copyIntoCheckout(dir string, srcs []string) error {
	if a := r.opts.Agent; a != nil {
		return r.asAgent(`d="$0"; mkdir -p "$d" && cp -- "$@" "$d"/`, append([]string{dir}, srcs...)...)
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

// removeFromCheckout removes dir of the checkout, as the agent when that
// is another user.
func (r *run) removeFromCheckout(dir string) error {
	if r.opts.Agent != nil {
		return r.asAgent(`rm -rf -- "$0"`, dir)
	}
	return os.RemoveAll(dir)
}

func (r *run) asAgent(script string, args ...string) error {
	a := r.opts.Agent
	cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
	cmd.Env = r.env
	a.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("as %s: %w: %s", a.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
