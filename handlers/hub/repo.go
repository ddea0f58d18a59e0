package hub

import (
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"
)

// repoClient is one repository through an installation's client: what
// every part of goRepo holds, so each names the repository in its errors.
type repoClient struct {
	c           *github.Client
	owner, name string
}

func (r *repoClient) FullName() string { return r.owner + "/" + r.name }

// at names an issue or PR in errors.
func (r *repoClient) at(number int) string { return fmt.Sprintf("%s/%s#%d", r.owner, r.name, number) }

// status404 marks a 404 answer as ErrNotFound.
func status404(resp *github.Response, err error) error {
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
