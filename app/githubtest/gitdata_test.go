package githubtest_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
)

// The Git Data API of the fake writes real objects: a blob, a tree with an
// inline file and a nested path, a parentless commit and a ref made through
// go-github are what git sees; creating the ref again is refused, a
// non-fast-forward update needs force, and a contents:read token writes
// nothing.
func TestGitDataAPI(t *testing.T) {
	t.Parallel()
	gh, app := newFake(t)
	ctx := context.Background()
	owner, name := "octo-org", "alpha"
	write := tokenClient(t, gh, mint(t, app, "alpha", "write"))

	bin := []byte{0, 1, 2, 0xff}
	blob, _, err := write.Git.CreateBlob(ctx, owner, name, &github.Blob{
		Content: github.String(base64.StdEncoding.EncodeToString(bin)), Encoding: github.String("base64"),
	})
	if err != nil {
		t.Fatal(err)
	}
	tree, _, err := write.Git.CreateTree(ctx, owner, name, "", []*github.TreeEntry{
		{Path: github.String("dir/data.bin"), Mode: github.String("100644"), Type: github.String("blob"), SHA: blob.SHA},
		{Path: github.String("report.md"), Mode: github.String("100644"), Type: github.String("blob"), Content: github.String("# hi\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	commit, _, err := write.Git.CreateCommit(ctx, owner, name, &github.Commit{Message: github.String("artifacts"), Tree: &github.Tree{SHA: tree.SHA}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(commit.Parents) != 0 || commit.GetTree().GetSHA() != tree.GetSHA() {
		t.Fatalf("commit %+v: want no parents and tree %s", commit, tree.GetSHA())
	}
	ref := &github.Reference{Ref: github.String("refs/heads/agent-artifacts/T-1"), Object: &github.GitObject{SHA: commit.SHA}}
	if _, _, err := write.Git.CreateRef(ctx, owner, name, ref); err != nil {
		t.Fatal(err)
	}
	if got := gh.Ref(repoA, "refs/heads/agent-artifacts/T-1"); got != commit.GetSHA() {
		t.Fatalf("git sees the ref at %q; want %s", got, commit.GetSHA())
	}
	files := gh.TreeFiles(repoA, commit.GetSHA())
	if len(files) != 2 || files["dir/data.bin"] != string(bin) || files["report.md"] != "# hi\n" {
		t.Fatalf("the commit holds %q", files)
	}
	if p := gh.Parents(repoA, commit.GetSHA()); len(p) != 0 {
		t.Fatalf("parents %v", p)
	}
	got, _, err := write.Git.GetRef(ctx, owner, name, "heads/agent-artifacts/T-1")
	if err != nil || got.GetObject().GetSHA() != commit.GetSHA() {
		t.Fatalf("GetRef: %+v, %v", got, err)
	}
	c, _, err := write.Git.GetCommit(ctx, owner, name, commit.GetSHA())
	if err != nil || c.GetTree().GetSHA() != tree.GetSHA() {
		t.Fatalf("GetCommit: %+v, %v", c, err)
	}
	if _, resp, err := write.Git.GetRef(ctx, owner, name, "heads/none"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GetRef of a missing ref: %v", err)
	}

	// Creating it again is refused; a commit that does not descend from
	// the ref's needs force.
	if _, resp, err := write.Git.CreateRef(ctx, owner, name, ref); err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("second CreateRef: %v", err)
	}
	other, _, err := write.Git.CreateCommit(ctx, owner, name, &github.Commit{Message: github.String("other"), Tree: &github.Tree{SHA: tree.SHA}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref.Object.SHA = other.SHA
	if _, resp, err := write.Git.UpdateRef(ctx, owner, name, ref, false); err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("non-fast-forward update without force: %v", err)
	}
	if _, _, err := write.Git.UpdateRef(ctx, owner, name, ref, true); err != nil {
		t.Fatal(err)
	}
	if got := gh.Ref(repoA, "refs/heads/agent-artifacts/T-1"); got != other.GetSHA() {
		t.Fatalf("forced update left the ref at %s", got)
	}

	// Paths git cannot store are refused.
	if _, resp, err := write.Git.CreateTree(ctx, owner, name, "", []*github.TreeEntry{
		{Path: github.String(".git/config"), Mode: github.String("100644"), Type: github.String("blob"), Content: github.String("x")},
	}); err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a .git path was accepted: %v", err)
	}

	// A plan or task sandbox's token reads but writes nothing.
	read := tokenClient(t, gh, mint(t, app, "alpha", "read"))
	var gerr *github.ErrorResponse
	if _, _, err := read.Git.CreateBlob(ctx, owner, name, &github.Blob{Content: github.String("x"), Encoding: github.String("utf-8")}); !errors.As(err, &gerr) || gerr.Response.StatusCode != http.StatusForbidden {
		t.Fatalf("a contents:read token created a blob: %v", err)
	}
	ref.Ref = github.String("refs/heads/agent-artifacts/T-2")
	if _, _, err := read.Git.CreateRef(ctx, owner, name, ref); !errors.As(err, &gerr) || gerr.Response.StatusCode != http.StatusForbidden {
		t.Fatalf("a contents:read token created a ref: %v", err)
	}
	if _, _, err := read.Git.GetRef(ctx, owner, name, "heads/agent-artifacts/T-1"); err != nil {
		t.Fatalf("a contents:read token cannot read a ref: %v", err)
	}
	// A token for another repository does not see this one.
	beta := tokenClient(t, gh, mint(t, app, "beta", "write"))
	if _, resp, err := beta.Git.CreateBlob(ctx, owner, name, &github.Blob{Content: github.String("x")}); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a token for beta wrote to alpha: %v", err)
	}
	if refs := gh.RefsWithPrefix(repoA, "refs/heads/agent-artifacts/"); len(refs) != 1 {
		t.Fatalf("refs %v; want one", refs)
	}
}

// Git Data writes count for the secondary rate limit, as GitHub counts
// them.
func TestGitDataWritesAreRateLimited(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{SecondaryLimit: githubtest.RateLimit{Writes: 2, Per: 1 << 40}})
	gh.AddRepo(repoA, inst, nil)
	app := tokenClient(t, gh, "app-jwt")
	c := tokenClient(t, gh, mint(t, app, "alpha", "write"))
	ctx := context.Background()
	var errs []error
	for range 3 {
		_, _, err := c.Git.CreateBlob(ctx, "octo-org", "alpha", &github.Blob{Content: github.String("x"), Encoding: github.String("utf-8")})
		errs = append(errs, err)
	}
	var abuse *github.AbuseRateLimitError
	if errs[0] != nil || errs[1] != nil || !errors.As(errs[2], &abuse) {
		t.Fatalf("three blob writes under a limit of 2: %v", errs)
	}
	if served, refused := gh.RateLimited(); served != 2 || refused != 1 {
		t.Fatalf("served %d, refused %d; want 2 and 1", served, refused)
	}
}
