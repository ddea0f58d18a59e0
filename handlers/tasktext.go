package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/visible"
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
	// Withheld says why an outsider's issue that the configuration would
	// quote was not (no vouch for its text as it is now, no rendering).
	Withheld string
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
// when quoted (reports.outsiders) and a writer vouched for its text as it
// still is (vouch.go: this run's vouch, else the newest the App's
// acknowledgements keep), with its title and body as the reporter's words,
// as GitHub's rendering shows them (hidden.go).
func (a agentRun) taskText(ctx context.Context, gh hub.GitHub, number int, quoted bool, vouch *markers.Vouch) (taskInput, error) {
	var in taskInput
	issue, err := gh.Issue(ctx, number)
	if err != nil {
		return in, err
	}
	comments, err := gh.Comments(ctx, number)
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
	issueImages := imageSource{What: "the issue", Ref: hub.BodyRef{Kind: hub.BodyIssue, Number: number}, markdown: issue.GetBody()}
	// An issue the App opened (a routine's) holds the routine's task from
	// the default branch's .sandbox.yml: the App's own words.
	ok, err := true, error(nil)
	if login := a.c.trust.login.Load(); login == nil || !markers.IsOwnBot(issue.GetUser(), *login) {
		ok, err = isWriter(author)
	}
	switch {
	case err != nil:
		return in, err
	case ok:
		in.task.Title, in.task.Body = issue.GetTitle(), issue.GetBody()
		in.images = append(in.images, issueImages)
	case quoted:
		in.task.Title = outsiderTitle(number)
		rendered, err := a.quoteOutsider(ctx, gh, issue, comments, vouch, &in)
		if err != nil {
			return in, err
		}
		if in.task.Report != nil {
			issueImages.What, issueImages.rendered = "the issue by "+author, rendered
			in.images = append(in.images, issueImages)
		}
	default:
		in.task.Title = outsiderTitle(number)
		in.excluded.IssueAuthor = author
	}
	for _, c := range comments {
		login := c.GetUser().GetLogin()
		if markers.IsBotLogin(c.GetUser()) {
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
			Ref: hub.BodyRef{Kind: hub.BodyComment, Number: number, ID: c.GetID()}, markdown: c.GetBody()})
	}
	return in, nil
}

// quoteOutsider puts an outsider's issue in the task as their report when
// a writer vouched for its title and body as they are now and GitHub's
// rendering of it can be read; otherwise the task keeps "Issue #N" and
// the acknowledgement says why. It returns the rendering it quoted.
func (a agentRun) quoteOutsider(ctx context.Context, gh hub.GitHub, issue *github.Issue, comments []*github.IssueComment, vouch *markers.Vouch, in *taskInput) (string, error) {
	author := issue.GetUser().GetLogin()
	if vouch == nil {
		login, err := a.c.LoadIdentity(ctx)
		if err != nil {
			return "", err
		}
		vouch = lastVouch(markers.Comments(comments, login))
	}
	if vouch == nil || vouch.Digest != reportDigest(issue.GetTitle(), issue.GetBody()) {
		in.excluded.IssueAuthor, in.excluded.Withheld = author, a.withheldReason(vouch)
		zerolog.Ctx(ctx).Info().Bool("vouched", vouch != nil).Msg("an outsider's report not quoted: no vouch for its text as it is")
		return "", nil
	}
	// The text and its rendering come from one response, and the vouch is
	// checked again against that text: an edit after the read above would
	// otherwise pair the vouched text with the edit's rendering.
	rendered, err := gh.BodyHTML(ctx, hub.BodyRef{Kind: hub.BodyIssue, Number: issue.GetNumber()})
	if err == nil && vouch.Digest != reportDigest(rendered.Title, rendered.Body) {
		in.excluded.IssueAuthor, in.excluded.Withheld = author, a.withheldReason(vouch)
		zerolog.Ctx(ctx).Info().Msg("an outsider's report not quoted: edited as it was read")
		return "", nil
	}
	if err != nil || (rendered.Body != "" && strings.TrimSpace(rendered.HTML) == "") {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("GitHub's rendering of an outsider's report could not be read: not quoted")
		in.excluded.IssueAuthor, in.excluded.Withheld = author, unrendered
		return "", nil
	}
	r, err := outsiderReport(author, vouch.By, rendered.Title, rendered.Body, rendered.HTML)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("GitHub's rendering of an outsider's report could not be read: not quoted")
		in.excluded.IssueAuthor, in.excluded.Withheld = author, unrendered
		return "", nil
	}
	in.task.Report, in.excluded.Report = r, r
	return rendered.HTML, nil
}

// unrendered is why a report whose rendering the bot could not read is
// not quoted: what GitHub shows decides what is quoted.
const unrendered = "GitHub's rendering of its description could not be read (or showed nothing), and only what GitHub shows is quoted."

// outsiderReport is an outsider's issue as the agent is given it: what a
// reader sees of its title and of GitHub's rendering of its body, what
// that leaves out of the source named.
func outsiderReport(author, vouchedBy, title, body, rendered string) (*dispatch.Report, error) {
	var h visible.HiddenCounts
	t := visible.PlainTitle(title, &h)
	text, hb, err := visible.Text(rendered, body)
	if err != nil {
		return nil, err
	}
	hb.ZeroWidth, hb.Bidi, hb.Tags, hb.Controls = hb.ZeroWidth+h.ZeroWidth, hb.Bidi+h.Bidi, hb.Tags+h.Tags, hb.Controls+h.Controls
	return &dispatch.Report{Author: author, VouchedBy: vouchedBy, Title: t, Body: text, Removed: hb.Describe()}, nil
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
