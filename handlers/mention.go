package handlers

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// An @mention of the App hands it work the way people hand work to other
// coding agents: "@sandbox-bot add a cache to the client". It follows the
// command grammar's rules of where text counts (commandable): a mention
// the rendered comment shows as code (fenced, indented or an inline code
// span), quotes, hides in an HTML comment or folds into <details> is not
// addressed to the bot.

// ParseMention finds the first mention of @slug (or @slug[bot]) on a line
// a reader sees as ordinary text and returns what follows it: the rest of
// that line and every later line, trimmed. found is false when the comment
// does not address the App.
func ParseMention(body, slug string) (text string, found bool) {
	if slug == "" {
		return "", false
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	ok := commandable(lines)
	for i, raw := range lines {
		if !ok[i] {
			continue
		}
		end := mentionEnd(blankCodeSpans(raw), slug)
		if end < 0 {
			continue
		}
		rest := strings.TrimLeft(raw[end:], " \t,:;—-")
		if tail := strings.Join(lines[i+1:], "\n"); strings.TrimSpace(tail) != "" {
			rest += "\n" + tail
		}
		rest = strings.TrimSpace(rest)
		// "thanks @bot!" asks for nothing: punctuation is not instructions.
		if !strings.ContainsFunc(rest, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			rest = ""
		}
		return rest, true
	}
	return "", false
}

// mentionEnd returns the index just after the first "@slug" in line that
// GitHub would render as a mention, or -1. A mention starts a word (so
// "me@slug.dev" is an address, not a mention) and ends the login (so
// "@slug-fork" is someone else).
func mentionEnd(line, slug string) int {
	// ASCII only (slugs are ASCII): strings.ToLower may change the length
	// of a line that is not valid UTF-8, and the indices are the line's.
	lower, want := asciiLower(line), "@"+asciiLower(slug)
	for from := 0; ; {
		i := strings.Index(lower[from:], want)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(want)
		from = end
		if i > 0 && wordByte(lower[i-1]) || end < len(lower) && loginByte(lower[end]) {
			continue
		}
		end += len(botSuffix(lower[end:]))
		return end
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func botSuffix(s string) string {
	if strings.HasPrefix(s, "[bot]") {
		return "[bot]"
	}
	return ""
}

// loginByte: GitHub logins are letters, digits and hyphens.
func loginByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// wordByte: what before an "@" makes it part of a word (an e-mail address,
// a path), not a mention.
func wordByte(c byte) bool { return loginByte(c) || c == '.' || c == '/' }

// blankCodeSpans replaces inline code spans (a run of backticks, text, the
// same run) by spaces of the same length, so a mention inside one is not
// found and the indices of the rest stay those of the line. A backtick run that no run of the same
// length closes is literal text, as in CommonMark.
func blankCodeSpans(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closeAt := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				closeAt = j + m
				break
			}
			j += m
		}
		if closeAt < 0 {
			i += n
			continue
		}
		for k := i; k < closeAt; k++ {
			b[k] = ' '
		}
		i = closeAt
	}
	return string(b)
}

// mayAddress is the cheap test IssueComment runs on every comment before
// decoding it: a command needs a "/", a mention the App's "@slug". Before
// the App's identity is known any "@" may be one.
func (b *Base) mayAddress(body []byte) bool {
	if bytes.IndexByte(body, '/') >= 0 {
		return true
	}
	slug := b.slug()
	if slug == "" {
		return bytes.IndexByte(body, '@') >= 0
	}
	return bytes.Contains(bytes.ToLower(body), []byte("@"+strings.ToLower(slug)))
}

// slug is the App's slug once LoadIdentity has read it, else "". It does
// not wait for a LoadIdentity in progress (the intake calls it).
func (b *Base) slug() string {
	if login := b.trust.login.Load(); login != nil {
		return strings.TrimSuffix(*login, "[bot]")
	}
	return ""
}

// mention runs a comment that mentions the App and holds no command. A
// writer's mention on an issue starts the label's flow with the text as
// their instructions (or, on a plan awaiting approval, revises it); on an
// agent PR it is `/revise <text>`; on any other PR it gets a short reply
// saying what the bot does there. Anyone else gets the usual refusal.
func (b *Base) mention(ctx context.Context, cc commandContext, body string) error {
	login, err := b.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	slug := strings.TrimSuffix(login, "[bot]")
	text, found := ParseMention(body, slug)
	if !found {
		return nil
	}
	log := zerolog.Ctx(ctx)
	client, err := b.NewInstallationClient(cc.installationID)
	if err != nil {
		return err
	}
	// "@bot /status" is the command after the mention.
	if strings.HasPrefix(text, "/") {
		if cmd, perr := ParseCommand(text); cmd != nil || perr != nil {
			return b.command(ctx, client, cc, cmd, perr)
		}
	}
	owner, name := cc.owner(), cc.name()
	ok, err := b.canWrite(ctx, client, owner, name, cc.sender)
	if err != nil {
		return err
	}
	if !ok {
		log.Info().Str("sender", cc.sender).Msg("refusing mention: sender cannot write to the repository")
		return b.refuse(ctx, client, cc.repo, cc.number, cc.sender, "hand work to @"+slug)
	}
	revise := &Command{Name: "revise", Text: text}
	if cc.isPR {
		_, _, agent, err := b.agentPR(ctx, client, owner, name, cc.number)
		if err != nil {
			return err
		}
		if !agent {
			return b.reply(ctx, client, owner, name, cc.number, "github/mention_other_pr", MentionOtherPRData{Slug: slug, TriggerLabel: b.TriggerLabel})
		}
		if text == "" {
			return b.command(ctx, client, cc, nil, &CommandError{Msg: "Mention me with what to change, e.g. `@" + slug + " use the existing date helper`."})
		}
		log.Info().Str("sender", cc.sender).Msg("mention on the agent's pull request: revise")
		return b.command(ctx, client, cc, revise, nil)
	}
	if stateOf(cc.labels) == LabelAwaitingApproval {
		// A bare mention ("thanks @bot") must not throw the plan away.
		if text == "" {
			return b.command(ctx, client, cc, nil, &CommandError{Msg: "Mention me with what to change in the plan, e.g. `@" + slug + " use the existing date helper`."})
		}
		log.Info().Str("sender", cc.sender).Msg("mention on a plan awaiting approval: revise")
		return b.command(ctx, client, cc, revise, nil)
	}
	log.Info().Str("sender", cc.sender).Msg("mention on an issue: plan run")
	// The trigger label shows the issue is the agent's, as if a writer had
	// added it; the labeled event it causes is the App's own and ignored.
	if _, _, err := client.Issues.AddLabelsToIssue(ctx, owner, name, cc.number, []string{b.TriggerLabel}); err != nil {
		log.Warn().Err(err).Str("label", b.TriggerLabel).Msg("add the trigger label")
	}
	req := startRequest{
		InstallationID: cc.installationID, Repo: cc.repo, Number: cc.number, Mode: dispatch.ModePlan, Round: 1,
		Trigger: strconv.FormatInt(cc.commentID, 10), DeliveryID: cc.deliveryID, Sender: cc.sender, CommentID: cc.commentID,
	}
	if text != "" {
		req.Instructions = &dispatch.Comment{Author: cc.sender, Body: text}
	}
	return b.start(ctx, client, req)
}

// MentionOtherPRData is github/mention_other_pr: a writer mentioned the
// App on a pull request it did not open.
type MentionOtherPRData struct {
	Slug         string
	TriggerLabel string
}
