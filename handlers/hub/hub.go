// Package hub is the seam between the bot and GitHub. Everything the
// handlers and the run follower do on GitHub goes through Hub and GitHub:
// New speaks them over go-github, with the server's rate limiter in its
// clients (client.go); the lifecycle table's tests use GitHub in memory
// (hubtest), so every decision is tested without HTTP, and the scenario
// tests keep the wire (app/githubtest).
package hub

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/google/go-github/v62/github"
)

// WriteClass orders a GitHub write among its installation's writes that
// wait for the pace (app's pacer): a run's result goes first, then every
// write not marked, then what follows a posted result, then progress
// updates; within a class, writes go in the order they came.
type WriteClass int

const (
	// WriteNormal is every write not marked otherwise: replies,
	// acknowledgements, reactions, a start's state label.
	WriteNormal WriteClass = iota
	// WriteResult is a run's result: its plan comment, its pull request,
	// its final comment.
	WriteResult
	// WriteAfterResult is the bookkeeping of a result already posted: the
	// state label, the PR's labels and reviewers, the progress comment's
	// and the check run's last state.
	WriteAfterResult
	// WriteProgress is a progress update (Deferrable).
	WriteProgress
)

// WithWriteClass marks ctx's GitHub writes as of class c.
func WithWriteClass(ctx context.Context, c WriteClass) context.Context {
	return context.WithValue(ctx, writeClassKey{}, c)
}

// WriteClassOf is the class ctx's writes were marked with (WriteNormal if
// none).
func WriteClassOf(ctx context.Context) WriteClass {
	c, _ := ctx.Value(writeClassKey{}).(WriteClass)
	return c
}

type writeClassKey struct{}

// Deferrable marks ctx's GitHub writes as progress updates, which the next
// update or the run's end replaces. Where the installation's writes are
// paced, such a write goes at once only while the pace has room to spare;
// otherwise the pacer keeps it, behind every other write, and sends it
// when its turn comes unless a newer write of the same comment or check
// run replaces it first (ErrWriteQueued).
func Deferrable(ctx context.Context) context.Context {
	return WithWriteClass(ctx, WriteProgress)
}

// IsDeferrable says whether ctx's writes were marked with Deferrable.
func IsDeferrable(ctx context.Context) bool {
	return WriteClassOf(ctx) == WriteProgress
}

// ErrWriteQueued is a Deferrable write the pacer kept to send later: for
// its caller it is as good as sent.
var ErrWriteQueued = errors.New("github write queued: the installation's writes are paced, and this progress update goes when its turn comes unless a newer one replaces it")

// ErrWriteDeferred is a Deferrable write that was not sent and is not
// kept (the pacer is closing).
var ErrWriteDeferred = errors.New("github write deferred: the installation's writes are paced, and a progress update waits for the next one")

// Hub opens the seam: one repository through an installation, and the
// calls the App makes as itself.
type Hub interface {
	// Repo is the repository fullName ("owner/name") as installation
	// sees it.
	Repo(installation int64, fullName string) (GitHub, error)
	// AppSlug is the App's slug (GET /app with the App's JWT).
	AppSlug(ctx context.Context) (string, error)
	// MintToken creates an installation token for repo with the contents
	// permission ("read" or "write") and nothing else.
	MintToken(ctx context.Context, installation int64, repo, contents string) (string, time.Time, error)
	// RevokeToken revokes token (the token revokes itself); a token
	// already dead is revoked.
	RevokeToken(ctx context.Context, token string) error
}

// GitHub is one repository as the App's installation sees it. Methods take
// issue and pull request numbers of that repository.
type GitHub interface {
	// FullName is "owner/name".
	FullName() string
	Conversation
	People
	PullRequests
	Checks
	CI
	GitData
}

// Conversation is the repository, its .sandbox.yml, and the issues and
// pull requests as threads: comments, reactions, labels.
type Conversation interface {
	Repository(ctx context.Context) (*github.Repository, error)
	// ConfigFile is the repository's .sandbox.yml at ref ("" for the
	// default branch); ConfigFile.Found is false when it has none (or the
	// installation cannot read the repository).
	ConfigFile(ctx context.Context, ref string) (ConfigFile, error)
	Issue(ctx context.Context, number int) (*github.Issue, error)
	// CreateIssue opens an issue as the App (a routine's).
	CreateIssue(ctx context.Context, title, body string, labels []string) (*github.Issue, error)
	// Comments are every comment on an issue or PR, oldest first.
	Comments(ctx context.Context, number int) ([]*github.IssueComment, error)
	Comment(ctx context.Context, number int, body string) (*github.IssueComment, error)
	EditComment(ctx context.Context, id int64, body string) error
	// React reacts to comment commentID, or to the issue itself when it
	// is 0.
	React(ctx context.Context, number int, commentID int64, content string) error
	AddLabels(ctx context.Context, number int, labels ...string) error
	RemoveLabel(ctx context.Context, number int, label string) error
	// CreateLabel creates a label; one that exists is kept as it is.
	CreateLabel(ctx context.Context, name, color, description string) error
	// BodyHTML is a text and GitHub's rendering of it (body_html, asked
	// for with the application/vnd.github.full+json media type), from one
	// response: for a private repository its images are signed URLs.
	BodyHTML(ctx context.Context, ref BodyRef) (Rendered, error)
}

// Rendered is a text as written and as GitHub rendered it, read in one
// response, so the rendering is of exactly that text: a check of the text
// (a vouch's digest) holds for the rendering too, whatever edit comes
// between two reads.
type Rendered struct {
	// Title is an issue's title; empty for other texts.
	Title, Body, HTML string
}

// People are who may drive the bot.
type People interface {
	// Permission is login's permission on the repository (GitHub's legacy
	// field: admin, write, read, none; maintain reads write).
	Permission(ctx context.Context, login string) (string, error)
	// TeamMember reports whether login is an active member of team
	// ("org/slug"); a team that does not exist has no members.
	TeamMember(ctx context.Context, team, login string) (bool, error)
}

// PullRequests are the pull requests and their reviews.
type PullRequests interface {
	PullRequest(ctx context.Context, number int) (*github.PullRequest, error)
	// OpenPullRequests lists open pull requests from head ("owner:branch")
	// or into base, whichever is set (the first 100).
	OpenPullRequests(ctx context.Context, head, base string) ([]*github.PullRequest, error)
	CreatePullRequest(ctx context.Context, pr *github.NewPullRequest) (*github.PullRequest, error)
	EditPullRequestBody(ctx context.Context, number int, body string) (*github.PullRequest, error)
	RequestReviewers(ctx context.Context, number int, users, teams []string) error
	// UpdateBranch merges the base into the PR's branch through GitHub's
	// API; an error means it could not (a conflict).
	UpdateBranch(ctx context.Context, number int) error
	Reviews(ctx context.Context, number int) ([]*github.PullRequestReview, error)
	// ReviewComments are a PR's inline comments, oldest first.
	ReviewComments(ctx context.Context, number int) ([]*github.PullRequestComment, error)
	ReplyToReviewComment(ctx context.Context, number int, to int64, body string) error
	// PullFiles are a PR's changed files with their patches (GitHub's
	// diff of the PR, which inline comments must fall in).
	PullFiles(ctx context.Context, number int) ([]*github.CommitFile, error)
	// CreateReview submits one review of the PR's commit sha: event
	// COMMENT, the body and the inline comments; it returns its id.
	CreateReview(ctx context.Context, number int, sha, body string, comments []*github.DraftReviewComment) (int64, error)
}

// Checks are the check runs the bot shows a run's progress on.
type Checks interface {
	CheckRuns(ctx context.Context, sha, name string) ([]*github.CheckRun, error)
	CreateCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (*github.CheckRun, error)
	UpdateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error
}

// CI is what the repository's own checks say about a commit: every app's
// check runs (GitHub Actions jobs among them) and the commit statuses.
type CI interface {
	// CheckRunsOn lists every check run on ref, of every app.
	CheckRunsOn(ctx context.Context, ref string) ([]*github.CheckRun, error)
	// Statuses are ref's commit statuses, the newest of each context.
	Statuses(ctx context.Context, ref string) ([]*github.RepoStatus, error)
	// Annotations are a check run's annotations (the first 100).
	Annotations(ctx context.Context, checkRunID int64) ([]*github.CheckRunAnnotation, error)
	// WorkflowJob is the GitHub Actions job whose check run has that id.
	WorkflowJob(ctx context.Context, id int64) (*github.WorkflowJob, error)
	// WorkflowRun is an Actions workflow run: head_repository says whose
	// head it ran on (a fork's, for a fork's pull request).
	WorkflowRun(ctx context.Context, id int64) (*github.WorkflowRun, error)
	// JobLog streams a job's log to read: GitHub answers with a redirect
	// to a download URL, which is fetched without the installation's
	// credential.
	JobLog(ctx context.Context, id int64, read func(io.Reader) error) error
}

// GitData writes commits without a checkout (a task's artifacts).
type GitData interface {
	// RefCommit is the commit ref points at and that commit's tree; both
	// "" when the ref does not exist.
	RefCommit(ctx context.Context, ref string) (commit, tree string, err error)
	CreateBlob(ctx context.Context, content []byte) (string, error)
	CreateTree(ctx context.Context, entries []*github.TreeEntry) (string, error)
	CreateCommit(ctx context.Context, message, tree string) (string, error)
	// CreateRef creates ref at sha; ErrExists when it exists.
	CreateRef(ctx context.Context, ref, sha string) error
	// UpdateRef moves ref to sha, forced.
	UpdateRef(ctx context.Context, ref, sha string) error
	// DeleteRef deletes ref; one that is gone already is no error.
	DeleteRef(ctx context.Context, ref string) error
	// Archive is the tree at sha as GitHub's gzipped tarball (one top
	// directory), refused past max bytes: a preview's code.
	Archive(ctx context.Context, sha string, max int64) ([]byte, error)
}

// ConfigFile is a repository's .sandbox.yml as read.
type ConfigFile struct {
	Found bool
	// Source is where it was read, "owner/repo@ref" ("owner/repo@" for the
	// default branch), and Path its path there.
	Source, Path string
	Content      []byte
}

// Errors of the seam that callers act on; others are GitHub's own (see
// transientGitHubError).
var (
	// ErrNotFound: the repository, issue or ref does not exist (404).
	ErrNotFound = errors.New("not found on GitHub")
	// ErrExists: what was to be created exists already (422).
	ErrExists = errors.New("exists on GitHub already")
)
