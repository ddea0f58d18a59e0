package handlers

import "fmt"

// excludedText is whose text taskText left out.
type excludedText struct {
	// IssueAuthor wrote the issue (title and body) without write access.
	IssueAuthor string
	// Commenters are other people without write access who commented.
	Commenters []string
}

// outsiderTitle stands in for the title of an issue opened by someone who
// cannot write to the repository: the number says which issue, and nothing
// of their text reaches the agent.
func outsiderTitle(number int) string { return fmt.Sprintf("Issue #%d", number) }
