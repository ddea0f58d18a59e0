package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// excludedText is whose text taskText left out, and what it passed of an
// outsider's report.
type excludedText struct {
	// IssueAuthor wrote the issue (title and body) without write access,
	// and it was left out: Report is nil.
	IssueAuthor string
	// Commenters are other people without write access who commented.
	Commenters []string
	// Report is the outsider's issue as passed, when a writer vouched for
	// it and the configuration quotes such reports.
	Report *dispatch.Report
}

// outsiderTitle stands in for the title of an issue opened by someone who
// cannot write to the repository: the number says which issue.
func outsiderTitle(number int) string { return fmt.Sprintf("Issue #%d", number) }

// taskInput is what the agent is given of an issue: its text, whose text
// was left out, and where its pictures are (images.go).
type taskInput struct {
	task     dispatch.TaskText
	excluded excludedText
	images   []imageSource
}

// taskText collects the issue's title and body and the comments of people
// who can write to the repository. Comments by anyone else never reach
// the agent: it is how a stranger would inject instructions. An issue
// written by someone without write access reaches it as "Issue #N", and,
// when quoted (reports.outsiders), with its title and body as the
// reporter's words, hidden content removed: the writer who asked for the
// run (vouchedBy) vouched for the report.
func (a agentRun) taskText(ctx context.Context, gh GitHub, number int, quoted bool, vouchedBy string) (taskInput, error) {
	var in taskInput
	issue, err := gh.Issue(ctx, number)
	if err != nil {
		return in, err
	}
	writers := map[string]bool{}
	isWriter := func(login string) (bool, error) {
		if ok, seen := writers[login]; seen {
			return ok, nil
		}
		ok, err := a.c.canWrite(ctx, gh, login)
		writers[login] = ok
		return ok, err
	}
	in.task = dispatch.TaskText{URL: issue.GetHTMLURL()}
	author := issue.GetUser().GetLogin()
	issueImages := imageSource{What: "the issue", Ref: BodyRef{Kind: bodyIssue, Number: number}, markdown: issue.GetBody()}
	switch ok, err := isWriter(author); {
	case err != nil:
		return in, err
	case ok:
		in.task.Title, in.task.Body = issue.GetTitle(), issue.GetBody()
		in.images = append(in.images, issueImages)
	case quoted:
		in.task.Title = outsiderTitle(number)
		in.task.Report = outsiderReport(author, vouchedBy, issue.GetTitle(), issue.GetBody())
		in.excluded.Report = in.task.Report
		issueImages.What = "the issue by " + author
		in.images = append(in.images, issueImages)
	default:
		in.task.Title = outsiderTitle(number)
		in.excluded.IssueAuthor = author
	}
	comments, err := gh.Comments(ctx, number)
	if err != nil {
		return in, err
	}
	for _, c := range comments {
		login := c.GetUser().GetLogin()
		if isBotLogin(c.GetUser()) {
			continue
		}
		ok, err := isWriter(login)
		if err != nil {
			return in, err
		}
		if !ok {
			if login != author && !slices.Contains(in.excluded.Commenters, login) {
				in.excluded.Commenters = append(in.excluded.Commenters, login)
			}
			continue
		}
		in.task.Comments = append(in.task.Comments, dispatch.Comment{Author: login, Body: c.GetBody()})
		in.images = append(in.images, imageSource{What: "a comment by " + login,
			Ref: BodyRef{Kind: bodyComment, Number: number, ID: c.GetID()}, markdown: c.GetBody()})
	}
	return in, nil
}

// outsiderReport is an outsider's issue as the agent is given it: what a
// reader sees of its title and body, hidden content removed and named.
func outsiderReport(author, vouchedBy, title, body string) *dispatch.Report {
	t, ht := stripHidden(title)
	text, h := stripHidden(body)
	h.add(ht)
	return &dispatch.Report{Author: author, VouchedBy: vouchedBy, Title: strings.Join(strings.Fields(t), " "), Body: text, Removed: h.describe()}
}

// reportAck is what the acknowledgement says of an outsider's report the
// agent was given.
func reportAck(r *dispatch.Report) *ReportAck {
	if r == nil {
		return nil
	}
	passed := "its title"
	if n := utf8.RuneCountInString(r.Body); n > 0 {
		passed = fmt.Sprintf("its title and its description (%d characters)", n)
	}
	return &ReportAck{Author: r.Author, VouchedBy: r.VouchedBy, Passed: passed, Removed: r.Removed}
}
