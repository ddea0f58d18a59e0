package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/setupcache"
)

// The setup cache in the run: before setup, a key is made from the setup
// commands, the cached paths and the key files of the checkout; an entry
// of that key is restored instead of running setup. After setup on the
// base branch's own commit, before the agent has run, what setup produced
// is saved under the key. The runner reads and writes the cache directory
// (the agent cannot: it is the runner's, 0700); tar runs as the agent, so
// what it reads and writes in the checkout is what the agent may.

// setupCache is the cache for this run's setup.
type setupCache struct {
	r     *checkout
	store *setupcache.Store
	key   string
	paths []string
}

// newSetupCache returns nil, with the reason in rep, when the run has no
// cache: no directory (the process backend, the CLI), task mode, turned
// off, or nothing to keep.
func (c *checkout) newSetupCache(rep *dispatch.SetupReport) (*setupCache, error) {
	dir := c.opts.SetupCacheDir
	switch {
	case dir == "" || c.ws.git == nil:
		return nil, nil
	case !c.cfg.Cache.On():
		rep.Cache = "off (cache.enabled: false)"
		return nil, nil
	}
	keyFiles, paths := setupcache.Defaults(c.ws.dir)
	if len(c.cfg.Cache.Paths) > 0 {
		paths = c.cfg.Cache.Paths
	}
	if len(paths) == 0 {
		rep.Cache = "not used: no cache.paths, and no lock file that implies them"
		return nil, nil
	}
	keyFiles = append(keyFiles, c.cfg.Cache.KeyFiles...)
	slices.Sort(keyFiles)
	files, err := setupcache.HashFiles(c.ws.dir, slices.Compact(keyFiles))
	if err != nil {
		return nil, err
	}
	path, _ := lookupEnv(c.ws.env, "PATH")
	key := setupcache.Key(setupcache.Inputs{Repo: c.order.Repo, Setup: c.cfg.Lifecycle.Setup, Paths: paths, Files: files, Tools: setupcache.ToolStamp(path)})
	rep.Key = key
	return &setupCache{r: c, key: key, paths: paths, store: &setupcache.Store{Dir: dir, MaxBytes: c.opts.SetupCacheMaxBytes}}, nil
}

// restore extracts the entry of the key into the checkout and reports
// whether setup can be skipped. A refused entry, or one that fails half
// way, leaves nothing of itself behind and setup runs.
func (c *setupCache) restore(rep *dispatch.SetupReport) bool {
	r := c.r
	m, err := c.store.Lookup(c.key, r.order.Repo)
	if errors.Is(err, setupcache.ErrMiss) {
		rep.Cache = noEntry
		return false
	}
	if err == nil {
		err = c.tar(r.work, []string{"-x", "-f", "-", "--no-same-owner"}, func(stdin io.Writer) error {
			m, err = c.store.Restore(c.key, r.order.Repo, stdin)
			return err
		}, nil)
	}
	if err != nil {
		rep.Cache = fmt.Sprintf("entry %.12s not restored: %v", c.key, err)
		var ce *setupcache.CorruptError
		if errors.As(err, &ce) {
			rep.Cache = err.Error()
		}
		r.log.Warn().Err(err).Str("key", c.key).Msg("setup cache: entry not restored; running setup")
		c.removePaths()
		return false
	}
	rep.Cache = fmt.Sprintf("restored entry %.12s (%s, saved on %.12s at %s)", c.key, humanize.IBytes(uint64(m.Size)), m.Commit, m.Created.UTC().Format(time.RFC3339))
	r.log.Info().Str("key", c.key).Int64("bytes", m.Size).Str("commit", m.Commit).Msg("setup cache: restored; setup skipped")
	return true
}

// save keeps what setup produced, when the checkout is the base branch's
// own commit: an agent branch holds files an earlier agent wrote, and its
// setup could plant code for the next run.
func (c *setupCache) save(rep *dispatch.SetupReport) {
	r := c.r
	if r.ws.startSHA == "" || r.ws.startSHA != r.ws.baseSHA {
		note(rep, "not saved: the checkout is not the base branch's own commit")
		return
	}
	var present []string
	for _, p := range c.paths {
		if exists(filepath.Join(r.ws.dir, filepath.FromSlash(p))) {
			present = append(present, p)
		}
	}
	if len(present) == 0 {
		note(rep, "not saved: setup produced none of "+fmt.Sprint(c.paths))
		return
	}
	var m setupcache.Manifest
	args := append([]string{"-c", "-f", "-", "--"}, present...)
	err := c.tar(r.work, args, nil, func(stdout io.Reader) error {
		var err error
		m, err = c.store.Save(setupcache.Manifest{Key: c.key, Repo: r.order.Repo, Commit: r.ws.baseSHA, Paths: present, Setup: r.cfg.Lifecycle.Setup}, stdout)
		return err
	})
	if err != nil {
		note(rep, fmt.Sprintf("not saved: %v", err))
		r.log.Warn().Err(err).Str("key", c.key).Msg("setup cache: not saved")
		return
	}
	note(rep, fmt.Sprintf("saved entry %.12s (%s) for the next runs", c.key, humanize.IBytes(uint64(m.Size))))
	r.log.Info().Str("key", c.key).Int64("bytes", m.Size).Strs("paths", present).Msg("setup cache: saved")
}

// note adds what the save did to what the restore said: a miss is worth
// no words once the save speaks, a refused entry is.
func note(rep *dispatch.SetupReport, s string) {
	if rep.Cache == "" || rep.Cache == noEntry {
		rep.Cache = s
		return
	}
	rep.Cache += "; " + s
}

const noEntry = "no entry for this key"

// tar runs tar as the agent in the checkout, feeding its stdin from feed
// or handing its stdout to drain. The stream fails when tar fails, so a
// tar that stops half way never makes a complete-looking entry.
func (c *setupCache) tar(ctx context.Context, args []string, feed func(io.Writer) error, drain func(io.Reader) error) error {
	r := c.r
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tar", args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = r.ws.dir
	// Not the project's environment: TAR_OPTIONS from a repository's .env
	// must not change what is archived or how it is extracted.
	path, _ := lookupEnv(r.ws.env, "PATH")
	cmd.Env = []string{"PATH=" + path, "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.opts.Agent.apply(cmd)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	pr, pw := io.Pipe()
	if feed != nil {
		cmd.Stdin = pr
	} else {
		cmd.Stdout = pw
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start tar: %w", err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("tar %s: %w: %s", args[0], err, lastLines(stderr.String(), 5, 2000))
		}
		if feed != nil {
			// A feed still writing has nobody to read it any more.
			pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		} else {
			// The reader sees tar's failure instead of a clean EOF.
			pw.CloseWithError(err)
		}
		waited <- err
	}()
	var err error
	if feed != nil {
		err = feed(pw)
		pw.CloseWithError(err)
	} else {
		err = drain(pr)
		pr.CloseWithError(err)
	}
	if err != nil {
		// tar may be blocked on a pipe nobody reads any more.
		cancel()
		<-waited
		return err
	}
	return <-waited
}

// removePaths clears what a failed restore may have left.
func (c *setupCache) removePaths() {
	r := c.r
	args := append([]string{"-rf", "--"}, c.paths...)
	cmd := exec.CommandContext(r.work, "rm", args...)
	cmd.Dir = r.ws.dir
	r.opts.Agent.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.log.Warn().Err(err).Str("output", string(out)).Msg("setup cache: could not clear a partial restore")
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// parseSize reads a size such as "2GiB" or a number of bytes; "" is 0.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	return int64(n), nil
}
