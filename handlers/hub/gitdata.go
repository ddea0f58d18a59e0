package hub

import (
	"context"
	"crypto/sha1" //nolint:gosec // git's object ids are SHA-1: this computes them, it does not secure anything with them
	"encoding/base64"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-github/v62/github"
)

// goGitData is the GitData of goRepo: commits written without a checkout,
// and the tarball of a tree.
type goGitData struct{ *repoClient }

func (r *goGitData) RefCommit(ctx context.Context, ref string) (string, string, error) {
	gr, resp, err := r.c.Git.GetRef(ctx, r.owner, r.name, ref)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return "", "", nil
		}
		return "", "", fmt.Errorf("read %s: %w", ref, err)
	}
	sha := gr.GetObject().GetSHA()
	c, _, err := r.c.Git.GetCommit(ctx, r.owner, r.name, sha)
	if err != nil {
		return "", "", fmt.Errorf("read commit %s of %s: %w", sha, ref, err)
	}
	return sha, c.GetTree().GetSHA(), nil
}

func (r *goGitData) CreateBlob(ctx context.Context, content []byte) (string, error) {
	b, _, err := r.c.Git.CreateBlob(ctx, r.owner, r.name, &github.Blob{Content: github.String(base64.StdEncoding.EncodeToString(content)), Encoding: github.String("base64")})
	if err != nil {
		return "", err
	}
	return b.GetSHA(), nil
}

func (r *goGitData) CreateTree(ctx context.Context, entries []*github.TreeEntry) (string, error) {
	t, _, err := r.c.Git.CreateTree(ctx, r.owner, r.name, "", entries)
	if err != nil {
		return "", err
	}
	return t.GetSHA(), nil
}

func (r *goGitData) CreateCommit(ctx context.Context, message, tree string) (string, error) {
	c, _, err := r.c.Git.CreateCommit(ctx, r.owner, r.name, &github.Commit{Message: &message, Tree: &github.Tree{SHA: &tree}}, nil)
	if err != nil {
		return "", err
	}
	return c.GetSHA(), nil
}

func (r *goGitData) CreateRef(ctx context.Context, ref, sha string) error {
	_, resp, err := r.c.Git.CreateRef(ctx, r.owner, r.name, &github.Reference{Ref: &ref, Object: &github.GitObject{SHA: &sha}})
	if err != nil && resp != nil && resp.StatusCode == http.StatusUnprocessableEntity {
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

func (r *goGitData) UpdateRef(ctx context.Context, ref, sha string) error {
	_, _, err := r.c.Git.UpdateRef(ctx, r.owner, r.name, &github.Reference{Ref: &ref, Object: &github.GitObject{SHA: &sha}}, true)
	return err
}

func (r *goGitData) DeleteRef(ctx context.Context, ref string) error {
	resp, err := r.c.Git.DeleteRef(ctx, r.owner, r.name, ref)
	if err != nil && resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnprocessableEntity) {
		return nil // gone already (GitHub answers 422 "Reference does not exist")
	}
	return err
}

// Archive follows GitHub's tarball link for sha and reads at most max
// bytes of it.
func (r *goGitData) Archive(ctx context.Context, sha string, max int64) ([]byte, error) {
	link, resp, err := r.c.Repositories.GetArchiveLink(ctx, r.owner, r.name, github.Tarball, &github.RepositoryContentGetOptions{Ref: sha}, 3)
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, status404(resp, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return nil, err
	}
	res, err := r.c.Client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("archive of %s at %s: GitHub answered %s", r.FullName(), sha, res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("archive of %s at %s: %w", r.FullName(), sha, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("archive of %s at %s: larger than %d bytes", r.FullName(), sha, max)
	}
	return b, nil
}

// GitObjectID is git's id of an object (GitHub's sha of a blob or tree): SHA-1 of "<type> <size>\0" and
// the content.
func GitObjectID(typ string, content []byte) []byte {
	h := sha1.New() //nolint:gosec // see the import
	fmt.Fprintf(h, "%s %d\x00", typ, len(content))
	h.Write(content)
	return h.Sum(nil)
}
