package hub

import (
	"fmt"

	"github.com/google/go-github/v62/github"
)

// listAll reads every page of a GitHub list, 100 items a page. what names
// the list for the error ("comments of o/r#1").
func listAll[T any](what string, list func(opt github.ListOptions) ([]T, *github.Response, error)) ([]T, error) {
	var all []T
	opt := github.ListOptions{PerPage: 100}
	for {
		page, resp, err := list(opt)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opt.Page = resp.NextPage
	}
}
