package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// A writer vouches for an outsider's issue by labeling it or by
// mentioning the App on it: for the title and body as they were at that
// moment, which the event's payload carries. The bot keeps a digest of
// them in the marker of the run's acknowledgement (its own comment, the
// only place a marker is trusted), and every run of the issue after that
// (execute, revise, rebase, continue, CI fix) quotes the report only while
// the issue's title and body are still the ones vouched for; an edit
// since turns the report into "Issue #N" and the acknowledgement says
// why. The body's Markdown names every picture it shows (an attachment's
// address never changes what it serves), so the digest covers the images
// too. /approve approves a plan, never a changed report.

// reportDigest is the digest a vouch keeps of an issue's title and body.
func reportDigest(title, body string) string {
	sum := sha256.Sum256([]byte(title + "\x00" + strings.ReplaceAll(body, "\r\n", "\n")))
	return hex.EncodeToString(sum[:])
}

// vouchOf is the vouch of writer for issue as an event's payload shows
// it.
func vouchOf(writer string, issue *github.Issue) *markers.Vouch {
	if issue == nil || writer == "" {
		return nil
	}
	return &markers.Vouch{By: writer, Digest: reportDigest(issue.GetTitle(), issue.GetBody())}
}

// lastVouch is the newest vouch the App's acknowledgements on an issue
// keep.
func lastVouch(marked []markers.Comment) *markers.Vouch {
	for i := len(marked) - 1; i >= 0; i-- {
		if m := marked[i].Marker; m.Kind == markers.KindAck && m.Vouch != nil {
			return m.Vouch
		}
	}
	return nil
}

// withheldReason is why an outsider's report was not quoted although the
// configuration quotes vouched reports: no vouch, or an edit since.
func (a agentRun) withheldReason(v *markers.Vouch) string {
	relabel := fmt.Sprintf("labeling the issue `%s` again (removing the label and adding it) when no plan waits for approval, or by mentioning the App on it", a.c.TriggerLabel)
	if v == nil {
		return "No writer vouched for its text by " + relabel + "."
	}
	return fmt.Sprintf("Its title or description changed after @%s vouched for it, so the changed text was not passed; "+
		"a person with write access vouches for the new text by %s.", v.By, relabel)
}
