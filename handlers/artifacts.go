package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// A task run has no repository to push to, and its sandbox holds a
// contents:read token: the bot, not the sandbox, stores what the run left
// in its artifacts directory, as a parentless commit on the branch
// agent-artifacts/<task-id> made through GitHub's Git Data API (the bot's
// image has no git). The result comment links the branch and every file.

// ArtifactBranchPrefix starts every branch that holds a task's artifacts.
const ArtifactBranchPrefix = "agent-artifacts/"

// ArtifactBranch is the branch that holds a task's artifacts.
func ArtifactBranch(taskID string) string { return ArtifactBranchPrefix + taskID }

// ArtifactDir is the directory of the artifacts branch that holds the
// files: nothing the agent names sits at the root, where GitHub looks for
// what it runs (.github/workflows, action.yml, dependabot.yml).
const ArtifactDir = "artifacts"

// SkipGitHubPath is why a file under a .github directory is not stored:
// whatever the App's permissions, the bot never writes a file GitHub
// could read as configuration (a workflow runs with the repository's
// secrets).
const SkipGitHubPath = "a .github path, which the bot never writes"

// refuseGitHubPaths skips every file with a .github directory anywhere in
// its path (in any case: GitHub's own checks fold it on some systems).
func refuseGitHubPaths(arts *dispatch.Artifacts) {
	kept := arts.Files[:0]
	for _, f := range arts.Files {
		github := false
		for _, seg := range strings.Split(f.Path, "/") {
			github = github || strings.EqualFold(seg, ".github")
		}
		if github {
			arts.Skipped = append(arts.Skipped, dispatch.SkippedArtifact{Path: f.Path, Size: int64(len(f.Data)), Reason: SkipGitHubPath})
			continue
		}
		kept = append(kept, f)
	}
	arts.Files = kept
}

// storedAt is where an artifact's file is on its branch.
func storedAt(p string) string { return ArtifactDir + "/" + p }

// Bounds of what the result comment lists, and of what goes into a tree
// request inline rather than as a blob of its own (one write per blob).
const (
	maxListedArtifacts = 50
	maxNameBytes       = 200
	inlineFileBytes    = 64 << 10
	inlineTotalBytes   = 1 << 20
)

// ArtifactsData is what a task's result comment says about its artifacts.
type ArtifactsData struct {
	// Branch and TreeURL name and link the artifacts branch ("" when no
	// file was stored).
	Branch  string
	TreeURL string
	// Commit is the branch's commit: the file links point at it, so they
	// stay right whatever later happens to the branch.
	Commit string
	Files  []ArtifactLink
	// Skipped are entries left out (links, over a cap), MoreSkipped those
	// not listed either.
	Skipped     []SkippedArtifactLine
	MoreSkipped int
	MoreFiles   int
	// Caps says the caps in words, for the skipped list.
	Caps string
	// Error says the artifacts could not be stored, for people; the
	// details are in the bot's log.
	Error string
}

// ArtifactLink is one stored file. Name is the sandbox's file name made
// safe for a code span (no backticks, no control characters, redacted).
type ArtifactLink struct {
	Name, URL, Size string
	// Redacted says secrets in the file were replaced before it was stored.
	Redacted bool
}

// SkippedArtifactLine is one entry left out, and why.
type SkippedArtifactLine struct {
	Name, Size, Reason string
}

// SkipSecret is why a file is not stored whose name, or binary content,
// holds a secret the bot knows (a task sandbox's agent can read its token
// and the provider keys: it must not get them committed).
const SkipSecret = "holds a secret"

// redactArtifacts keeps the bot's secrets off GitHub: a text file has them
// replaced (and is reported by path in the result), a binary file or a
// file whose name holds one is skipped.
func (rk *resultKeeper) redactArtifacts(arts *dispatch.Artifacts) map[string]bool {
	redacted := map[string]bool{}
	kept := arts.Files[:0]
	for _, f := range arts.Files {
		if rk.c.Secrets.Redact(f.Path) != f.Path {
			arts.Skipped = append(arts.Skipped, dispatch.SkippedArtifact{Path: f.Path, Size: int64(len(f.Data)), Reason: SkipSecret})
			continue
		}
		if text := string(f.Data); rk.c.Secrets.Redact(text) != text {
			if !isText(f.Data) {
				arts.Skipped = append(arts.Skipped, dispatch.SkippedArtifact{Path: f.Path, Size: int64(len(f.Data)), Reason: SkipSecret})
				continue
			}
			f.Data = []byte(rk.c.Secrets.Redact(text))
			redacted[f.Path] = true
		}
		kept = append(kept, f)
	}
	arts.Files = kept
	return redacted
}

// artifactName makes an untrusted path fit a code span: valid UTF-8,
// control characters shown as U+FFFD, backticks as quotes (a backtick
// would end the span and let the rest be markdown), secrets redacted,
// cut short.
func (rk *resultKeeper) artifactName(p string) string {
	p = strings.ToValidUTF8(rk.c.Secrets.Redact(p), "\uFFFD")
	p = strings.Map(func(c rune) rune {
		switch {
		case c == '`':
			return '\''
		case unicode.IsControl(c) || c == '\u2028' || c == '\u2029':
			return '\uFFFD'
		}
		return c
	}, p)
	if len(p) > maxNameBytes {
		p = sanitize.TruncateUTF8(p, maxNameBytes) + "…"
	}
	return strings.TrimSpace(p)
}

func sizeText(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// publishArtifacts stores a finished task run's artifacts on GitHub and
// says what the comment shows. A backend that cannot hand artifacts over
// (the in-memory one) gives nil: the comment lists the receipt's names.
// Errors GitHub may not repeat are returned (the result is posted again
// later); any other failure is logged and said in the comment.
func (rk *resultKeeper) publishArtifacts(ctx context.Context, rc *runContext) (*ArtifactsData, error) {
	reader, ok := rk.c.Backend.(dispatch.ArtifactReader)
	if !ok {
		return nil, nil
	}
	log := zerolog.Ctx(ctx)
	caps := rk.c.ArtifactCaps
	data := &ArtifactsData{Caps: fmt.Sprintf("%s per file, %s in all, %d files", sizeText(caps.FileBytes), sizeText(caps.TotalBytes), caps.MaxFiles)}
	arts, err := reader.Artifacts(ctx, rc.meta.TaskID, caps)
	if err != nil {
		log.Error().Err(err).Msg("read the task's artifacts")
		data.Error = "The bot could not read the run's artifacts; its log has the details."
		return data, nil
	}
	refuseGitHubPaths(arts)
	redacted := rk.redactArtifacts(arts)
	for i, s := range arts.Skipped {
		if i == maxListedArtifacts {
			data.MoreSkipped = len(arts.Skipped) - i
			break
		}
		data.Skipped = append(data.Skipped, SkippedArtifactLine{Name: rk.artifactName(s.Path), Size: sizeText(s.Size), Reason: s.Reason})
	}
	if len(arts.Files) == 0 {
		return data, nil
	}
	branch := ArtifactBranch(rc.meta.TaskID)
	stored := make([]dispatch.Artifact, len(arts.Files))
	for i, f := range arts.Files {
		stored[i] = dispatch.Artifact{Path: storedAt(f.Path), Data: f.Data}
	}
	commit, err := commitArtifacts(ctx, rc, branch, stored)
	if err != nil {
		if transientGitHubError(err) {
			return nil, err
		}
		log.Error().Err(err).Str("branch", branch).Msg("store the task's artifacts on GitHub")
		data.Error = fmt.Sprintf("GitHub refused the artifacts branch `%s`; the bot's log has the details.", branch)
		return data, nil
	}
	log.Info().Str("branch", branch).Str("commit", commit).Int("files", len(arts.Files)).Int64("bytes", arts.Bytes()).
		Int("skipped", len(arts.Skipped)).Msg("task artifacts stored")
	web := strings.TrimSuffix(rk.c.WebURL, "/") + "/" + rc.meta.Repo
	data.Branch, data.Commit = branch, commit
	data.TreeURL = web + "/tree/" + escapePath(branch)
	for i, f := range arts.Files {
		if i == maxListedArtifacts {
			data.MoreFiles = len(arts.Files) - i
			break
		}
		data.Files = append(data.Files, ArtifactLink{
			Name: rk.artifactName(f.Path), URL: web + "/blob/" + commit + "/" + escapePath(storedAt(f.Path)), Size: sizeText(int64(len(f.Data))),
			Redacted: redacted[f.Path],
		})
	}
	return data, nil
}

// escapePath escapes each segment of a slash-separated path for a URL.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// commitArtifacts makes branch point at a parentless commit of files and
// returns the commit. It is idempotent: when the branch already holds
// exactly these files (a retry, a restart, another replica), it writes
// nothing; the tree is computed here first so that check costs no write.
func commitArtifacts(ctx context.Context, rc *runContext, branch string, files []dispatch.Artifact) (string, error) {
	ref := "refs/heads/" + branch
	want := artifactTreeSHA(files)
	existing, existingTree, err := rc.gh.RefCommit(ctx, ref)
	if err != nil {
		return "", err
	}
	if existing != "" && existingTree == want {
		return existing, nil
	}
	tree, err := createArtifactTree(ctx, rc, files)
	if err != nil {
		return "", err
	}
	if existing != "" && existingTree == tree {
		return existing, nil
	}
	msg := fmt.Sprintf("Artifacts of task %s\n\nWhat the sandbox-bot task run left in its artifacts directory, for %s#%d.\nStored by the bot; the run itself could not write to the repository.",
		rc.meta.TaskID, rc.meta.Repo, rc.meta.Number)
	commit, err := rc.gh.CreateCommit(ctx, msg, tree)
	if err != nil {
		return "", fmt.Errorf("create the artifacts commit: %w", err)
	}
	if existing == "" {
		err := rc.gh.CreateRef(ctx, ref, commit)
		if err == nil {
			return commit, nil
		}
		if !errors.Is(err, hub.ErrExists) {
			return "", fmt.Errorf("create %s: %w", ref, err)
		}
		// Made meanwhile (another replica): the same files are fine.
		if existing, existingTree, err = rc.gh.RefCommit(ctx, ref); err != nil {
			return "", err
		}
		if existingTree == tree {
			return existing, nil
		}
	}
	// The branch is the task's own and holds other files (caps changed
	// across a restart, or someone pushed there): the comment must show
	// what the branch holds, so the run's files replace them.
	if err := rc.gh.UpdateRef(ctx, ref, commit); err != nil {
		return "", fmt.Errorf("update %s: %w", ref, err)
	}
	return commit, nil
}

// createArtifactTree writes the files' tree. Small text files travel
// inside the tree request (one write for all of them); others are blobs
// of their own, base64-encoded.
func createArtifactTree(ctx context.Context, rc *runContext, files []dispatch.Artifact) (string, error) {
	var entries []*github.TreeEntry
	inline := 0
	for _, f := range files {
		e := &github.TreeEntry{Path: github.String(f.Path), Mode: github.String("100644"), Type: github.String("blob")}
		if isText(f.Data) && len(f.Data) <= inlineFileBytes && inline+len(f.Data) <= inlineTotalBytes {
			inline += len(f.Data)
			e.Content = github.String(string(f.Data))
		} else {
			sha, err := rc.gh.CreateBlob(ctx, f.Data)
			if err != nil {
				return "", fmt.Errorf("create the blob of artifact %s: %w", f.Path, err)
			}
			e.SHA = &sha
		}
		entries = append(entries, e)
	}
	tree, err := rc.gh.CreateTree(ctx, entries)
	if err != nil {
		return "", fmt.Errorf("create the artifacts tree: %w", err)
	}
	return tree, nil
}

// isText reports whether b can travel as a JSON string unchanged.
func isText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}

// TaskDoneData is github/task_done: a task run finished; its artifacts are
// on their branch (Artifacts), or, on a backend that cannot hand them
// over (nil), named from the receipt.
type TaskDoneData struct {
	Receipt
	Marker    string
	Artifacts *ArtifactsData
}

// postTaskResult stores the artifacts, then posts the result comment that
// links them. A retry after a transient failure finds the branch made
// and writes nothing again.
func (rp *resultPoster) postTaskResult(ctx context.Context, rc *runContext, res *dispatch.Result, prog *follow.Progress, state lifecycle.State) error {
	arts, err := rp.keep.publishArtifacts(ctx, rc)
	if err != nil {
		return err
	}
	rcpt := rc.receipt(res)
	return rp.show(ctx, rc, res, prog, state, closing{"success", "Done", res.PRSummary}, func(ctx context.Context) error {
		return rp.c.reply(ctx, rc.gh, rc.meta.Number, "github/task_done", TaskDoneData{Receipt: rcpt, Marker: rcpt.marker(markers.KindResult), Artifacts: arts})
	})
}
