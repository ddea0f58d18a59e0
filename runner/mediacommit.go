package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
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

// mediaCapture is the media stage of an implementing run, a value of its
// own built from what it reads (the dev server's settings, the agent's
// recordings), where it writes (the checkout through the run's branch, the
// receipt) and as whom (the agent).
type mediaCapture struct {
	dev sandboxcfg.Dev
	// chromium and ffmpeg are the options' (empty: found on PATH, tools).
	chromium, ffmpeg string
	// fileCap and runCap bound one file and all of the run's media.
	fileCap, runCap int64
	// dir is the checkout, workDir the runner's, outputDir the sandbox's
	// output directory.
	dir, workDir, outputDir, taskID string
	env                             []string
	agent                           *AgentUser
	// recordings is where the agent's browser saved its screencasts; ""
	// when it had no browser.
	recordings string
	br         *branch
	res        *dispatch.Result
	red        *Redactor
	log        zerolog.Logger
	prog       *reporter
}

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
func (m *mediaCapture) capture(ctx context.Context) {
	files := append(m.captureRoutes(ctx), m.agentRecordings(ctx)...)
	files = m.capMedia(files)
	if len(files) == 0 {
		return
	}
	rel := mediaDir(m.taskID)
	dst := filepath.Join(m.dir, filepath.FromSlash(rel))
	var srcs, shots, recs []string
	for _, f := range files {
		srcs = append(srcs, f.src)
		if f.recording {
			recs = append(recs, rel+"/"+filepath.Base(f.src))
		} else {
			shots = append(shots, rel+"/"+filepath.Base(f.src))
		}
	}
	if err := m.copyIntoCheckout(dst, srcs); err != nil {
		m.mediaFailed("copy into the checkout", err)
		return
	}
	m.br.mu.Lock()
	defer m.br.mu.Unlock()
	sha, err := m.br.git.CommitPaths(ctx, fmt.Sprintf("Add screenshots and recordings for review\n\nCaptured by sandbox-bot; the next commit removes them, the PR shows them\nfrom this one.\n\nTask: %s", m.taskID), rel)
	if err == nil && sha == "" {
		err = errors.New("nothing to commit")
	}
	if err != nil {
		m.mediaFailed("commit", err)
		return
	}
	if err := m.removeFromCheckout(dst); err != nil {
		m.mediaFailed("remove from the checkout", err)
		return
	}
	if _, err := m.br.git.CommitPaths(ctx, fmt.Sprintf("Remove the review media from the branch tip\n\nThey stay in %s, where the PR links them.\n\nTask: %s", sha, m.taskID), rel); err != nil {
		m.mediaFailed("removal commit", err)
		return
	}
	m.res.MediaCommit, m.res.ScreenshotPaths, m.res.RecordingPaths = sha, shots, recs
	if len(shots) > 0 {
		m.res.MediaError = ""
	}
	m.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("media commit %s: %d screenshot(s), %d recording(s)", sha[:12], len(shots), len(recs))})
}

// captureRoutes screenshots and records dev.routes.
func (m *mediaCapture) captureRoutes(ctx context.Context) []mediaFile {
	dev := m.dev
	if dev.Command == "" || dev.Port == 0 || len(dev.Routes) == 0 {
		return nil
	}
	chromium, ffmpeg := m.tools()
	if chromium == "" {
		m.mediaFailed("", errors.New("no Chromium is installed in the sandbox"))
		return nil
	}
	m.prog.emit(dispatch.Progress{Stage: "media", Message: fmt.Sprintf("capturing %d route(s)", len(dev.Routes))})
	res, err := media.Capture(ctx, media.Options{
		Chromium: chromium, FFmpeg: ffmpeg, Dir: m.dir, Env: m.env,
		Command: dev.Command, Port: dev.Port, Routes: dev.Routes, OutDir: filepath.Join(m.outputDir, "media"),
		Credential: m.agent.credential(), Log: m.log.With().Str("stage", "media").Logger(),
	})
	if err != nil {
		m.mediaFailed("", err)
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
func (m *mediaCapture) mediaFailed(step string, err error) {
	reason := err.Error()
	if step != "" {
		reason = step + ": " + reason
	}
	reason = m.red.String(termtext.Clean(strings.TrimPrefix(reason, "media: ")))
	m.log.Warn().Str("reason", reason).Msg("media: no screenshots")
	m.prog.emit(dispatch.Progress{Stage: "media", Message: "failed: " + clipString(reason, 200)})
	if m.res.MediaError == "" {
		m.res.MediaError = clipString(reason, 500)
	}
}

// agentRecordings converts what the agent recorded with its browser.
func (m *mediaCapture) agentRecordings(ctx context.Context) []mediaFile {
	if m.recordings == "" {
		return nil
	}
	_, ffmpeg := m.tools()
	if ffmpeg == "" {
		m.log.Warn().Msg("no ffmpeg: the agent's recordings are left out")
		return nil
	}
	// ffmpeg runs as the agent and writes where the agent may.
	out := filepath.Join(m.workDir, "recordings-webp")
	if err := os.MkdirAll(out, 0o755); err != nil {
		m.log.Warn().Err(err).Msg("media: recordings output")
		return nil
	}
	if err := m.agent.give(out); err != nil {
		m.log.Warn().Err(err).Msg("media: recordings output")
		return nil
	}
	done, skipped, err := media.ConvertRecordings(ctx, ffmpeg, m.recordings, out, m.agent.credential())
	if err != nil {
		m.log.Warn().Err(err).Msg("media: the agent's recordings")
	}
	for _, s := range skipped {
		m.res.MediaOmitted = append(m.res.MediaOmitted, "recording "+s)
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
func (m *mediaCapture) capMedia(files []mediaFile) []mediaFile {
	fileCap, runCap := m.fileCap, m.runCap
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
			m.res.MediaOmitted = append(m.res.MediaOmitted, name+": not a regular file")
		case fi.Size() > fileCap:
			m.res.MediaOmitted = append(m.res.MediaOmitted, fmt.Sprintf("%s: %s is over the per-file cap of %s", name, mib(fi.Size()), mib(fileCap)))
		case total+fi.Size() > runCap:
			m.res.MediaOmitted = append(m.res.MediaOmitted, fmt.Sprintf("%s: %s would pass the per-run cap of %s", name, mib(fi.Size()), mib(runCap)))
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

// tools are Chromium and ffmpeg: the options', else found on PATH, looked
// up only when there is something to capture.
func (m *mediaCapture) tools() (chromium, ffmpeg string) {
	chromium, ffmpeg = m.chromium, m.ffmpeg
	if chromium == "" || ffmpeg == "" {
		c, f := media.Lookup()
		chromium, ffmpeg = firstNonEmpty(chromium, c), firstNonEmpty(ffmpeg, f)
	}
	return chromium, ffmpeg
}

// copyIntoCheckout copies files into dir of the checkout, which is the
// agent's: as the agent when that is another user.
func (m *mediaCapture) copyIntoCheckout(dir string, srcs []string) error {
	if a := m.agent; a != nil {
		return m.asAgent(`d="$0"; mkdir -p "$d" && cp -- "$@" "$d"/`, append([]string{dir}, srcs...)...)
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
func (m *mediaCapture) removeFromCheckout(dir string) error {
	if m.agent != nil {
		return m.asAgent(`rm -rf -- "$0"`, dir)
	}
	return os.RemoveAll(dir)
}

func (m *mediaCapture) asAgent(script string, args ...string) error {
	a := m.agent
	cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
	cmd.Env = m.env
	a.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("as %s: %w: %s", a.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
